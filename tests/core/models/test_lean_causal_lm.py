"""The lean tree of a causal LM (ragdesk/core/models/lean_causal_lm.py) against transformers'
model read from the same folder: the same weights and rotary embeddings, the same answers
through the lean decoders, the logits of transformers' forward; and no transformers modeling
import on the way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from ragdesk.core.engine.generators import CausalLMGenerator, PassageText
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate
from ragdesk.core.errors import MissingModelError
from ragdesk.core.models import gguf_files
from ragdesk.core.models.fast_tokenizers import load_tokenizer
from ragdesk.core.models.lean_causal_lm import LeanCausalLM, load_lean_causal_lm
from ragdesk.core.types import Answer, Hit
from tests.core.engine.test_qwen2_decoder import build_tiny_qwen2
from tests.core.models.test_mapped_weights import _tied_gemma, other_weights_folder

QUESTION = "who wrote the first book"
REPO = Path(__file__).resolve().parents[3]


def _reference(folder: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder), use_safetensors=True,
                                                dtype=torch.float32).eval()


def _hits(tiny_models: Any, n: int = 4) -> list[Hit]:
    return [Hit(i, t, " ".join(x.split()[:70 - 8 * i]), 70.0 - i)
            for i, (t, x) in enumerate(tiny_models.corpus[:n])]


@pytest.fixture(scope="module")
def qwen_folder(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, tok = build_tiny_qwen2(tiny_models)
    out = tmp_path_factory.mktemp("qwen2")
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def _folders(tiny_models: Any, qwen_folder: Path, tmp: Path) -> dict[str, Path]:
    return {"gemma3": Path(tiny_models.gemma3), "gemma3-tied": _tied_gemma(tiny_models, tmp),
            "qwen2": qwen_folder}


@pytest.mark.parametrize("which", ["gemma3", "gemma3-tied", "qwen2"])
def test_same_weights_and_rotary_as_transformers(tiny_models: Any, qwen_folder: Path,
                                                 tmp_path: Path, which: str) -> None:
    folder = _folders(tiny_models, qwen_folder, tmp_path / "tied")[which]
    ref = _reference(folder)
    got = load_lean_causal_lm(folder)
    assert isinstance(got, LeanCausalLM) and not got.training
    assert got.lean_architecture == type(ref).__name__
    params, want = dict(got.named_parameters()), dict(ref.named_parameters())
    assert params.keys() == want.keys()
    assert all(torch.equal(params[k], want[k]) for k in params)
    assert not any(p.requires_grad for p in got.parameters())
    tied = ref.lm_head.weight is ref.model.embed_tokens.weight
    assert tied == (which == "gemma3-tied")
    assert (got.lm_head.weight is got.model.embed_tokens.weight) == tied
    # read without transformers (ragdesk.core.lean_config): the same settings, no version
    want_gc = {k: v for k, v in ref.generation_config.to_dict().items()
               if k != "transformers_version"}
    assert got.generation_config.to_dict() == want_gc
    x = torch.zeros(1, dtype=torch.float32)
    pos = torch.tensor([[0, 1, 5, 17, 300, 1023]])
    for layer_type in set(getattr(ref.config, "layer_types", None) or ["full_attention"]):
        extra = (layer_type,) if which.startswith("gemma") else ()
        for a, b in zip(got.model.rotary_emb(x, pos, *extra), ref.model.rotary_emb(x, pos, *extra),
                        strict=True):
            assert torch.equal(a, b), layer_type


@pytest.mark.parametrize("which", ["gemma3", "qwen2"])
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_answers_equal_the_lean_decoder_over_transformers_model(
        tiny_models: Any, qwen_folder: Path, tmp_path: Path, which: str, precision: str) -> None:
    folder = _folders(tiny_models, qwen_folder, tmp_path / "tied")[which]
    tok = load_tokenizer(folder)
    lean_tree = load_lean_causal_lm(folder)
    assert lean_tree is not None
    a = CausalLMGenerator(lean_tree, tok, "lean", precision=precision, no_repeat_ngram_size=0)
    b = CausalLMGenerator(_reference(folder), tok, "hf", precision=precision,
                          no_repeat_ngram_size=0)
    assert a.lean_decoder is not None and b.lean_decoder is not None
    assert type(a.lean_decoder) is type(b.lean_decoder)
    assert a.settings == b.settings and a.vocab_size == b.vocab_size
    hits = _hits(tiny_models)
    runs: tuple[tuple[Callable[..., Answer], dict[str, Any]], ...] = (
        (rag_token_generate, {}), (rag_sequence_generate, {"decoding": "thorough"}))
    for fn, kw in runs:
        got = fn(a, QUESTION, hits, max_new_tokens=6, **kw)
        want = fn(b, QUESTION, hits, max_new_tokens=6, **kw)
        assert got.token_ids == want.token_ids
        assert got.logprob == want.logprob


def test_lean_decoder_over_the_tree_equals_transformers_forward(tiny_models: Any) -> None:
    folder = Path(tiny_models.gemma3)
    tok = load_tokenizer(folder)
    lean_tree = load_lean_causal_lm(folder)
    assert lean_tree is not None
    gen = CausalLMGenerator(lean_tree, tok, "lean", precision="float32",
                            no_repeat_ngram_size=0)
    ref = _reference(folder)
    hits = _hits(tiny_models)
    ctx = gen.prepare(QUESTION, [PassageText(h.title, h.text) for h in hits])
    lp = torch.log_softmax(ctx.first_logits, -1)
    for z in range(len(hits)):
        with torch.no_grad():
            out = ref(input_ids=torch.tensor([ctx.input_ids[z]]), use_cache=False)
        want = torch.log_softmax(out.logits[0, -1].float(), -1)
        assert torch.allclose(lp[z], want, atol=1e-4), z


def test_models_it_does_not_reproduce_are_left_to_transformers(tiny_models: Any,
                                                              tmp_path: Path) -> None:
    folder = tmp_path / "capped"
    shutil.copytree(tiny_models.gemma3, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["attn_logit_softcapping"] = 50.0
    (folder / "config.json").write_text(json.dumps(cfg))
    assert load_lean_causal_lm(folder) is None
    # the GPT-2 test model: no lean decoder at all
    assert load_lean_causal_lm(Path(tiny_models.causal_lm)) is None


def test_a_file_of_other_weights_is_refused(tiny_models: Any, tmp_path: Path) -> None:
    with pytest.raises(MissingModelError, match="does not hold the weights"):
        load_lean_causal_lm(other_weights_folder(tiny_models, tmp_path))


def test_it_has_no_forward_of_its_own(tiny_models: Any) -> None:
    tree = load_lean_causal_lm(Path(tiny_models.gemma3))
    assert tree is not None
    with pytest.raises(MissingModelError, match="forward is not loaded"):
        tree(input_ids=torch.tensor([[1, 2]]))


def _fake_converted_gguf(tiny_models: Any, tmp_path: Path) -> Path:
    """A file with a converted copy beside it, as the first load of a GGUF leaves it (the
    copy is the tiny Gemma's folder; the file itself is never parsed while the copy is
    valid)."""
    gguf = tmp_path / "tiny-gemma.gguf"
    gguf.write_bytes(b"GGUF-placeholder")
    cache = gguf_files.cache_dir_for(gguf)
    shutil.copytree(tiny_models.gemma3, cache)
    (cache / gguf_files.SOURCE_FILE).write_text(json.dumps(gguf_files._source_stamp(gguf)))
    assert gguf_files.cache_is_valid(gguf)
    return gguf


def test_a_converted_gguf_is_read_as_a_lean_tree_only_for_answering(
        tiny_models: Any, tmp_path: Path) -> None:
    gguf = _fake_converted_gguf(tiny_models, tmp_path)
    model, _ = gguf_files.load_gguf_causal_lm(gguf, answering=True)
    assert isinstance(model, LeanCausalLM)
    model, _ = gguf_files.load_gguf_causal_lm(gguf)
    assert type(model).__name__ == "Gemma3ForCausalLM"


def test_answering_imports_no_transformers_modeling(tiny_models: Any, tmp_path: Path) -> None:
    gguf = _fake_converted_gguf(tiny_models, tmp_path)
    script = (
        "import sys\n"
        "from ragdesk.core.models.loading import load_generator\n"
        "from ragdesk.core.engine.rag_token import rag_token_generate\n"
        "from ragdesk.core.types import Hit\n"
        f"gen = load_generator({str(gguf)!r}, precision='float32', answering=True)\n"
        "out = rag_token_generate(gen, 'who wrote it', [Hit(0, 'A', 'a text of words', 1.0)],"
        " max_new_tokens=3)\n"
        "assert out.token_ids, out\n"
        "print(type(gen.model).__name__, sorted(m for m in ('transformers.modeling_utils',"
        " 'torch._dynamo', 'torch.distributed.tensor', 'scipy.optimize') if m in sys.modules))\n")
    assert _last_line_of(script) == "LeanCausalLM []"


def _last_line_of(script: str) -> str:
    """The last line a Python script run in a fresh process prints (it must succeed)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split("\n")[-2]


def _gemma_with_its_tokenizer(tmp_path: Path) -> Path:
    """A tiny Gemma 3 behind a fake GGUF whose converted copy holds a Gemma tokenizer (the
    starter's pipeline in small, which ragdesk reads without transformers), as the starter's
    own converted folder does."""
    from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig

    from tests.core.test_lean_tokenizer import _gemma

    tok = AutoTokenizer.from_pretrained(str(_gemma(tmp_path)))
    cfg = Gemma3TextConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
        sliding_window=16, layer_types=["sliding_attention", "full_attention"],
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id, initializer_range=0.2, tie_word_embeddings=False)
    torch.manual_seed(0)
    gguf = tmp_path / "tiny-gemma-tok.gguf"
    gguf.write_bytes(b"GGUF-placeholder")
    cache = gguf_files.cache_dir_for(gguf)
    Gemma3ForCausalLM(cfg).eval().save_pretrained(str(cache))
    tok.save_pretrained(str(cache))
    (cache / gguf_files.SOURCE_FILE).write_text(json.dumps(gguf_files._source_stamp(gguf)))
    return gguf


def test_a_one_shot_answer_imports_no_transformers(tiny_models: Any, tmp_path: Path) -> None:
    """Both models loaded for answering, a question encoded and answered: transformers, whose
    package import alone is most of a second, is never imported (configurations, generation
    settings, tokenizers, chat template and score processors are ragdesk's readings)."""
    gguf = _gemma_with_its_tokenizer(tmp_path)
    script = (
        "import sys\n"
        "from ragdesk.core.models.loading import load_generator, load_question_encoder\n"
        "from ragdesk.core.engine.rag_token import rag_token_generate\n"
        "from ragdesk.core.types import Hit\n"
        f"enc = load_question_encoder({str(tiny_models.st_encoder)!r}, answering=True)\n"
        "assert enc.encode(['who wrote it']).shape[0] == 1\n"
        f"gen = load_generator({str(gguf)!r}, precision='bfloat16', answering=True)\n"
        "out = rag_token_generate(gen, 'who wrote it', [Hit(0, 'A', 'a text of words', 1.0)],"
        " max_new_tokens=4)\n"
        "assert out.token_ids, out\n"
        "print(type(gen.model).__name__, type(gen.tokenizer).__name__,"
        " type(enc.tokenizer).__name__, sorted(m for m in sys.modules"
        " if m.split('.')[0] == 'transformers'))\n")
    assert _last_line_of(script) == "LeanCausalLM LeanTokenizer LeanTokenizer []"
