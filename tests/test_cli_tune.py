"""`ragdesk tune`: the app's tuning job from the command line, with the same job folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.training import synthetic


@pytest.fixture()
def data(tiny_models, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    root = tmp_path / "data"
    synthetic.build_snapshot(root, tiny_models.st_encoder)
    synthetic.register_tiny_pack(root, "tiny", tiny_models.st_encoder, tiny_models.st_encoder,
                                 tiny_models.bart)
    return root


def _cli(data: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from ragdesk.cli.main import main

    code = main(["--data-dir", str(data), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_tune_registers_the_pack_the_app_would(data: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from ragdesk.core.app import AppContext
    from ragdesk.core.training.tune import TuneChoices, TuneJob, job_folder, resumable_step

    qs = synthetic.write_jsonl(tmp_path / "q.jsonl", synthetic.questions() * 2)
    code, out, err = _cli(data, "tune", str(qs), "--pack", "tiny", "--held-out", "0.25",
                          "--json", capsys=capsys)
    assert code == 0, err
    res = json.loads(out)
    assert res["pack"] == "tiny-tuned" and res["held_out"] == 4 and res["steps"] >= 1
    assert "Training the question encoder" in err and "loss" in err
    ctx = AppContext(data)
    try:
        job = TuneJob(qs, "tiny", choices=TuneChoices(held_out=0.25))
        assert Path(res["folder"]) == job_folder(ctx.data, ctx.catalog, job)  # the app's job
        assert resumable_step(ctx.data, ctx.catalog, job) is None  # finished
        assert "tiny-tuned" in {r.name for r in ctx.catalog.list_model_packs()}
    finally:
        ctx.close()
    code, out, err = _cli(data, "ask", "--pack", "tiny-tuned", "--docs", "2",
                          "--max-new-tokens", "4", "--json", "what is the secret word of bob?",
                          capsys=capsys)
    assert code == 0, err


def test_the_help_gives_the_job_s_recipe_and_objective() -> None:
    from ragdesk.cli.tune_cmd import EPILOG
    from ragdesk.core.training.config import PASSAGES_DEPTH
    from ragdesk.core.training.tune import TuneChoices

    d = TuneChoices()
    assert (d.epochs, d.lr, d.batch_size, d.held_out, d.n_docs) == (6, 2e-5, 16, 0.2, 5)
    text = " ".join(EPILOG.split())
    assert "(6 epochs, lr 2e-5, batch 16)" in text and "docs/finetuning.md" in text
    assert f"top {PASSAGES_DEPTH} passages" in text and "top-5 retrieval" in text
    assert "--objective passages" in text and "not read, nor loaded" in text
    assert "through its frozen reader" not in text


def test_tune_errors_say_what_to_fix(data: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(data, "tune", str(tmp_path / "missing.jsonl"), "--pack", "tiny",
                        capsys=capsys)
    assert code != 0 and "missing.jsonl: no such file" in err and "Traceback" not in err
    one = synthetic.write_jsonl(tmp_path / "one.jsonl", synthetic.questions()[:1])
    code, _, err = _cli(data, "tune", str(one), "--pack", "tiny", capsys=capsys)
    assert code != 0 and "at least 2 are needed" in err and "Traceback" not in err
    code, _, err = _cli(data, "tune", str(one), "--pack", "tiny", "--held-out", "0.9",
                        capsys=capsys)
    assert code == 2 and "from 5% to 50%, not 90.0%" in err
    code, _, err = _cli(data, "tune", str(one), "--pack", "tiny", "--held-out", "20",
                        capsys=capsys)
    assert code == 2 and "not 2000.0%" in err and "--held-out 0.2" in err  # a share, not percent
    code, _, err = _cli(data, "tune", str(one), "--pack", "tiny", "--held-out", "0.504",
                        capsys=capsys)
    assert code == 2 and "not 50.4%" in err and "--held-out 0.2" not in err  # a fraction
