"""The lean BERT (``load_encoder(..., answering=True)``) against transformers' BertModel and
DPR encoders as the reference: the same vectors, the same kernel twin, the same refusals."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ragdesk.core.encoders import TextEncoder, load_encoder
from ragdesk.core.encoders.lean_bert import LeanBertModel, load_lean_encoder_model
from ragdesk.core.errors import MissingModelError
from ragdesk.core.models.loading import load_question_encoder

REPO = Path(__file__).resolve().parents[2]

# role each tiny folder is loaded for, and the lean class it should get
FOLDERS = {"st_encoder": ("question", "LeanBertModel"),
           "question_encoder": ("question", "LeanDPREncoder"),
           "ctx_encoder": ("passage", "LeanDPREncoder")}


def _texts(tiny_models) -> list[str]:  # type: ignore[no-untyped-def]
    # lengths from a few tokens to a hundred, in one batch: padding and the mask are exercised
    return [text[: 5 + 70 * i] for i, (_, text) in enumerate(tiny_models.corpus[:6])]


def _copy(src: Path, dst: Path, **config: object) -> Path:
    shutil.copytree(src, dst)
    if config:
        cfg = json.loads((dst / "config.json").read_text())
        cfg.update(config)
        (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _rewrite_weights(folder: Path, change) -> None:  # type: ignore[no-untyped-def]
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    weights = change(load_file(str(path)))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path),
              metadata={"format": "pt"})


def _padded(enc: TextEncoder, texts: list[str]) -> dict[str, torch.Tensor]:
    return enc._pad(enc.tokenize(texts))


def _lean_and_exact(tiny_models, which: str):  # type: ignore[no-untyped-def]
    """The tiny encoder ``which`` loaded for answering, and through transformers."""
    role, _ = FOLDERS[which]
    folder = getattr(tiny_models, which)
    return load_encoder(folder, role=role, answering=True), load_encoder(folder, role=role)


@pytest.mark.parametrize("which", sorted(FOLDERS))
def test_answering_vectors_equal_the_transformers_forward(tiny_models, which: str) -> None:  # type: ignore[no-untyped-def]
    lean_class = FOLDERS[which][1]
    lean, exact = _lean_and_exact(tiny_models, which)
    assert type(lean.model).__name__ == lean_class
    assert type(exact.model).__name__ != lean_class
    assert lean.info == exact.info and lean.max_length == exact.max_length
    texts = _texts(tiny_models)
    for batch_size in (64, 2):
        np.testing.assert_allclose(lean.encode(texts, batch_size=batch_size),
                                   exact.encode(texts, batch_size=batch_size), atol=1e-5)


def _bert(model):  # type: ignore[no-untyped-def]
    inner = getattr(model, "question_encoder", None) or getattr(model, "ctx_encoder", None)
    return model if inner is None else inner.bert_model


@pytest.mark.parametrize("which", sorted(FOLDERS))
def test_hidden_states_and_pooler_equal_transformers(tiny_models, which: str) -> None:  # type: ignore[no-untyped-def]
    lean, exact = _lean_and_exact(tiny_models, which)
    assert set(lean.model.state_dict()) <= set(exact.model.state_dict())
    texts = _texts(tiny_models)
    with torch.inference_mode():
        for batch in (_padded(exact, texts), _padded(exact, texts[:1])):  # padded, unpadded
            got, want = _bert(lean.model)(**batch), _bert(exact.model)(**batch)
            torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state,
                                       atol=1e-5, rtol=0)
            if want.pooler_output is None:  # DPR's BERT has none
                assert got.pooler_output is None
            else:
                torch.testing.assert_close(got.pooler_output, want.pooler_output, atol=1e-5,
                                           rtol=0)
            # DPR: the first token's state (projected where it has a projection)
            torch.testing.assert_close(lean.model(**batch).pooler_output,
                                       exact.model(**batch).pooler_output, atol=1e-5, rtol=0)


def test_lean_weights_are_frozen_float32_on_the_cpu(tiny_models) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.encoders import ST_FAMILY

    model = load_lean_encoder_model(tiny_models.st_encoder, ST_FAMILY)
    assert model is not None and not model.training
    assert isinstance(model, LeanBertModel)  # what a sentence-transformers folder builds
    tensors = [*model.parameters(), *model.buffers()]
    assert all(t.device.type == "cpu" and t.dtype == torch.float32 and not t.requires_grad
               for t in tensors)
    assert model.get_input_embeddings() is model.embeddings.word_embeddings


@pytest.mark.parametrize("which", sorted(FOLDERS))
def test_bfloat16_kernel_twin_builds_from_the_lean_model(tiny_models, which: str,  # type: ignore[no-untyped-def]
                                                         bf16_kernel_here: bool) -> None:
    if not bf16_kernel_here:
        pytest.skip("this CPU cannot run oneDNN's packed bfloat16 products")
    lean, exact = (e.at_precision("bfloat16") for e in _lean_and_exact(tiny_models, which))
    assert lean.precision == exact.precision == "bfloat16"
    texts = _texts(tiny_models)
    np.testing.assert_allclose(lean.encode(texts), exact.encode(texts), atol=1e-6, rtol=0)


def test_a_projected_dpr_encoder(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from transformers import DPRConfig, DPRQuestionEncoder

    cfg = DPRConfig.from_pretrained(str(tiny_models.question_encoder))
    cfg.projection_dim = 16
    torch.manual_seed(5)
    folder = tmp_path / "projected"
    DPRQuestionEncoder(cfg).eval().save_pretrained(folder)
    for name in os.listdir(tiny_models.question_encoder):
        if "token" in name or name == "vocab.txt":
            shutil.copy(tiny_models.question_encoder / name, folder / name)
    lean = load_encoder(folder, role="question", answering=True)
    exact = load_encoder(folder, role="question")
    assert lean.model.question_encoder.encode_proj is not None and lean.dim == 16
    texts = _texts(tiny_models)
    np.testing.assert_allclose(lean.encode(texts), exact.encode(texts), atol=1e-5)


def test_a_bert_saved_under_its_head_prefix(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a BERT saved from BertFor...: every key under "bert.", which from_pretrained strips
    folder = _copy(tiny_models.st_encoder, tmp_path / "prefixed")
    _rewrite_weights(folder, lambda w: {f"bert.{k}": v for k, v in w.items()})
    lean = load_encoder(folder, role="question", answering=True)
    exact = load_encoder(folder, role="question")
    assert type(lean.model).__name__ == "LeanBertModel"
    texts = _texts(tiny_models)
    np.testing.assert_allclose(lean.encode(texts), exact.encode(texts), atol=1e-5)


def test_buffers_older_transformers_saved_are_dropped(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # all-MiniLM-L6-v2's file (transformers 4.8) holds embeddings.position_ids
    folder = _copy(tiny_models.st_encoder, tmp_path / "old-buffers")
    _rewrite_weights(folder, lambda w: {**w, "embeddings.position_ids": torch.arange(512)[None]})
    lean = load_encoder(folder, role="question", answering=True)
    assert type(lean.model).__name__ == "LeanBertModel"
    texts = _texts(tiny_models)
    np.testing.assert_allclose(lean.encode(texts), load_encoder(folder).encode(texts),
                               atol=1e-5)


@pytest.mark.parametrize("config", [{"position_embedding_type": "relative_key"},
                                    {"hidden_act": "relu"}, {"is_decoder": True}])
def test_configs_it_does_not_reproduce_stay_with_transformers(
        tiny_models: Any, tmp_path: Path, config: dict[str, object]) -> None:
    folder = _copy(tiny_models.st_encoder, tmp_path / "other", **config)
    enc = load_encoder(folder, role="question", answering=True)
    assert type(enc.model).__name__ == "BertModel"


def test_weights_it_has_no_place_for_stay_with_transformers(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _copy(tiny_models.st_encoder, tmp_path / "with-head")
    _rewrite_weights(folder, lambda w: {**w, "cls.predictions.bias": torch.zeros(4)})
    enc = load_encoder(folder, role="question", answering=True)
    assert type(enc.model).__name__ == "BertModel"


def test_the_pooler_is_optional_for_sentence_transformers(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _copy(tiny_models.st_encoder, tmp_path / "no-pooler")
    _rewrite_weights(folder, lambda w: {k: v for k, v in w.items() if "pooler" not in k})
    lean = load_encoder(folder, role="question", answering=True)
    assert type(lean.model).__name__ == "LeanBertModel" and lean.model.pooler is None
    texts = _texts(tiny_models)
    np.testing.assert_allclose(lean.encode(texts), load_encoder(folder).encode(texts),
                               atol=1e-5)


@pytest.mark.parametrize("which", ["st_encoder", "question_encoder"])
@pytest.mark.parametrize("damage", ["missing", "shape"])
def test_damaged_weights_are_a_missing_model(tiny_models: Any, tmp_path: Path, which: str,
                                             damage: str) -> None:
    folder = _copy(getattr(tiny_models, which), tmp_path / "damaged")

    def change(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        key = next(k for k in sorted(w) if k.endswith("intermediate.dense.weight"))
        if damage == "missing":
            del w[key]
        else:
            w[key] = w[key][:-1]
        return w

    _rewrite_weights(folder, change)
    with pytest.raises(MissingModelError, match="could not be loaded"):
        load_question_encoder(folder, answering=True)
    with pytest.raises(MissingModelError):
        load_encoder(folder, role="question", answering=True)


_NO_MODELING = """
import json, sys
from ragdesk.core.models.loading import load_question_encoder
enc = load_question_encoder(sys.argv[1], answering=True)
vec = enc.encode(["who wrote the first book about it?"])
print(json.dumps({"model": type(enc.model).__name__, "dim": int(vec.shape[1]),
                  "heavy": sorted(m for m in ("transformers.modeling_utils", "torch._dynamo",
                                              "scipy.optimize") if m in sys.modules)}))
"""


@pytest.mark.parametrize("which", ["st_encoder", "question_encoder"])
def test_answering_imports_no_transformers_modeling(tiny_models, which: str) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", _NO_MODELING, str(getattr(tiny_models, which))],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["model"] in ("LeanBertModel", "LeanDPREncoder")
    assert out["heavy"] == [], out
