"""Test helpers: a tiny GGUF file and a fake Hugging Face cache.

``write_tiny_gguf`` writes the tiny GPT-2 causal LM as a GGUF file, laid out as llama.cpp
does it: the ``gguf`` package's GGUFWriter takes the tensors under llama.cpp's names (from
gguf's own tensor-name map), GPT-2's Conv1D weights transposed (llama.cpp's convert script does
the same; transformers transposes them back), and the byte-level BPE vocabulary and merges as
``tokenizer.ggml.*`` metadata. No output.weight is written, so the embeddings stay tied.

``fake_hub_snapshot`` lays a folder out as a huggingface_hub download leaves it in the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

_TRANSPOSED = ("attn_qkv.weight", "attn_output.weight", "ffn_up.weight", "ffn_down.weight")


def write_tiny_gguf(causal_lm_dir: Path, out: Path) -> Path:
    import gguf
    import numpy as np
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(str(causal_lm_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(causal_lm_dir))
    cfg = model.config
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), "gpt2")
    w.add_name("tiny-gpt2")
    w.add_block_count(cfg.n_layer)
    w.add_context_length(cfg.n_positions)
    w.add_embedding_length(cfg.n_embd)
    w.add_feed_forward_length(4 * cfg.n_embd)
    w.add_head_count(cfg.n_head)
    w.add_layer_norm_eps(cfg.layer_norm_epsilon)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    vocab = tok.get_vocab()
    tokens = [""] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    specials = set(tok.all_special_tokens)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL
                       for t in tokens])
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_bos_token_id(tok.bos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_pad_token_id(tok.pad_token_id)
    w.add_unk_token_id(tok.unk_token_id)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GPT2, cfg.n_layer)
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied to the token embeddings
        base, suffix = name.rsplit(".", 1)
        gname = names.get_name(base)
        assert gname is not None, name
        full = f"{gname}.{suffix}"
        arr = tensor.detach().numpy().astype(np.float32)
        if full.endswith(_TRANSPOSED):
            arr = np.ascontiguousarray(arr.T)
        w.add_tensor(full, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def fake_hub_snapshot(cache: Path, repo_id: str, src: Path, *, commit: str = "a" * 40,
                      ref: str = "main") -> Path:
    """Lay out ``src`` in ``cache`` as huggingface_hub does after a download of ``repo_id``."""
    import shutil

    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    shutil.copytree(src, snap)
    ref_file = repo / "refs" / ref
    ref_file.parent.mkdir(parents=True, exist_ok=True)
    ref_file.write_text(commit)
    return snap
