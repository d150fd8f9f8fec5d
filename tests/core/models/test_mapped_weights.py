"""A causal LM built around its memory-mapped safetensors against ``from_pretrained``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from ragdesk.core.errors import MissingModelError
from ragdesk.core.models.mapped_weights import load_mapped_causal_lm


def _tied_gemma(tiny_models: Any, folder: Path) -> Path:
    """The tiny Gemma 3 with its output layer tied to its embedding, as the starter's is
    (saved once in the file, under one of the two names)."""
    from transformers import AutoConfig, Gemma3ForCausalLM

    cfg = AutoConfig.from_pretrained(str(tiny_models.gemma3))
    cfg.tie_word_embeddings = True
    torch.manual_seed(3)
    model = Gemma3ForCausalLM(cfg).eval()
    model.save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize("tied", [False, True])
def test_equal_to_from_pretrained(tiny_models: Any, tmp_path: Path, tied: bool) -> None:
    from transformers import AutoModelForCausalLM

    folder = _tied_gemma(tiny_models, tmp_path / "tied") if tied else Path(tiny_models.gemma3)
    ref = AutoModelForCausalLM.from_pretrained(str(folder), use_safetensors=True,
                                               dtype=torch.float32).eval()
    got = load_mapped_causal_lm(folder)
    assert type(got) is type(ref) and not got.training
    params, want = dict(got.named_parameters()), dict(ref.named_parameters())
    assert params.keys() == want.keys()
    assert all(torch.equal(params[k], want[k]) and params[k].dtype == want[k].dtype
               for k in params)
    buffers, want_b = dict(got.named_buffers()), dict(ref.named_buffers())
    assert buffers.keys() == want_b.keys()
    assert all(torch.equal(buffers[k], want_b[k]) for k in buffers)
    assert (got.lm_head.weight is got.model.embed_tokens.weight) == tied
    assert (ref.lm_head.weight is ref.model.embed_tokens.weight) == tied
    assert got.config.to_dict() == ref.config.to_dict()
    assert got.generation_config.to_dict() == ref.generation_config.to_dict()
    ids = torch.tensor([[1, 17, 230, 5, 99, 1000, 42]])
    with torch.no_grad():
        assert torch.equal(got(ids).logits, ref(ids).logits)


def test_weights_are_mapped_not_copied(tiny_models: Any) -> None:
    from safetensors import safe_open

    got = load_mapped_causal_lm(Path(tiny_models.gemma3))
    with safe_open(str(Path(tiny_models.gemma3) / "model.safetensors"), "pt") as fh:
        name = next(k for k in fh.keys() if k.endswith("q_proj.weight"))  # noqa: SIM118
    param = dict(got.named_parameters())[name]
    # a tensor over a file mapping: storage not allocated by torch's CPU allocator
    assert not param.untyped_storage().resizable()


def other_weights_folder(tiny_models: Any, tmp_path: Path) -> Path:
    """The tiny Gemma 3's config beside a file that holds one unrelated weight."""
    from safetensors.torch import save_file

    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / "config.json").write_bytes((Path(tiny_models.gemma3) / "config.json").read_bytes())
    save_file({"model.norm.weight": torch.zeros(64)}, str(folder / "model.safetensors"))
    return folder


def test_a_file_of_other_weights_is_refused(tiny_models: Any, tmp_path: Path) -> None:
    with pytest.raises(MissingModelError, match="missing"):
        load_mapped_causal_lm(other_weights_folder(tiny_models, tmp_path))
