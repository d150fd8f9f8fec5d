"""Limits an answer or a fit runs into ended in internal errors or bad values.

- ``ask --max-new-tokens 1000000`` with a BART pack: IndexError at position 514 (exit 70);
- ``ask --temperature`` accepted -1 (inverts p(z|x)), 0, nan, inf, 1e-300 (exit 0);
- the active ivf-pq variant's file deleted: ``ask`` exited 70 with FileNotFoundError;
- ``calibrate --docs 1000000`` stored τ = 100 (the bound of the search).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.errors import BadInputError
from ragdesk.core.evaluation.calibrate import calibrate_temperature
from ragdesk.core.evaluation.questions import Question
from ragdesk.core.types import Hit
from tests.core.snapshots.util import open_data, synthetic_snapshot_files

N, DIM = 3000, 32  # the tiny DPR encoders' width


@pytest.fixture()
def tiny_setup(tiny_models: Any, tmp_path: Path, data_dir: Path) -> Path:
    """A synthetic snapshot 'syn' and a DPR + BART pack 'tiny'; returns a questions file."""
    from ragdesk.core.encoders import load_encoder
    from ragdesk.core.models.packs import PackSpec, register_pack
    from ragdesk.core.snapshots import import_snapshot

    src, npy, _ = synthetic_snapshot_files(tmp_path / "src", N, DIM)
    data, catalog = open_data(data_dir)
    try:
        import_snapshot(data, catalog, src, name="syn", embeddings=npy,
                        encoder=load_encoder(tiny_models.ctx_encoder, role="passage"))
        register_pack(catalog, PackSpec(
            name="tiny", kind="custom", question_encoder=str(tiny_models.question_encoder),
            passage_encoder=str(tiny_models.ctx_encoder), generator=str(tiny_models.bart),
            generator_kind="seq2seq", encoder_family="dpr", encoder_dim=DIM))
    finally:
        catalog.close()
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(
        json.dumps({"question": f"which passage is number {i}?", "answer": [f"number {i}"]})
        + "\n" for i in range(40)), encoding="utf-8")
    return questions


def test_answer_longer_than_the_generator_positions(cli, tiny_setup: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("ask", "which passage?", "--pack", "tiny", "--max-new-tokens",
                         "1000000")
    assert code == 2, (out, err)
    assert "position limit is 512" in err and "--max-new-tokens 511" in err, err
    code, out, err = cli("ask", "which passage?", "--pack", "tiny", "--max-new-tokens", "4")
    assert code == 0, err


@pytest.mark.parametrize("t", ["-1", "0", "nan", "inf", "1e-300", "1e6"])
def test_temperature_out_of_range(cli, tiny_setup: Path, t: str) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("ask", "which passage?", "--pack", "tiny", f"--temperature={t}")
    assert code == 2, (out, err)
    assert "retrieval temperature must be between 0.001 and 100" in err


def test_options_check_is_the_one_range() -> None:
    from ragdesk.core.options import AnswerOptions

    for bad in (-1.0, 0.0, float("nan"), float("inf"), 1e-300, True):
        with pytest.raises(BadInputError, match="temperature"):
            AnswerOptions(temperature=bad).check()
    AnswerOptions(temperature=0.05).check()
    AnswerOptions().check()


def test_deleted_variant_file_is_a_damaged_snapshot(cli, tiny_setup: Path,  # type: ignore[no-untyped-def]
                                                    data_dir: Path) -> None:
    code, _, err = cli("index", "quantize", "syn", "--variant", "ivf-pq", "--queries", "50")
    assert code == 0, err
    code, _, err = cli("index", "switch", "syn", "--variant", "ivf-pq")
    assert code == 0, err
    variant_file = next((data_dir / "snapshots").rglob("index.ivf-pq*"))
    variant_file.unlink()
    code, out, err = cli("ask", "which passage?", "--pack", "tiny", "--max-new-tokens", "4")
    assert code in (1, 2), (out, err)
    assert f"{variant_file.name}: missing" in err, err
    assert "ragdesk index verify" in err and "quantize" in err
    assert "internal error" not in err


def test_calibrate_with_more_docs_than_passages(cli, tiny_setup: Path,  # type: ignore[no-untyped-def]
                                                data_dir: Path) -> None:
    code, out, err = cli("index", "calibrate", "syn", str(tiny_setup), "--pack", "tiny",
                         "--docs", "1000000")
    assert code == 2, (out, err)
    assert f"more than the {N:,} passages" in err
    assert not list((data_dir / "snapshots").rglob("calibration.json"))


class _Snapshot:
    """Answer passages always ranked last: the likelihood grows with τ without end."""

    size = 100

    def search(self, vecs: np.ndarray, k: int) -> list[list[Hit]]:
        return [[Hit(j, "t", "the answer" if j >= k - 2 else "nothing", float(k - j))
                 for j in range(k)] for _ in range(len(vecs))]


class _Encoder:
    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)


def test_a_fit_at_the_bound_is_refused() -> None:
    questions = [Question(f"q{i}", ("the answer",), i + 1) for i in range(10)]
    with pytest.raises(BadInputError, match="at the bound of the search"):
        calibrate_temperature(_Snapshot(), _Encoder(), questions, docs=10)
