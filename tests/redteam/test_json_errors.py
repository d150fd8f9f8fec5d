"""Under ``--json`` errors were plain text on stderr, and ``index switch|remove``,
``models download|import|remove|use|setup-starter`` had no ``--json``; ``eval -`` (questions
on stdin) was refused.

Under --json every outcome is one JSON document on stdout; an error is
``{"error": ..., "hint": ..., "exit": N}`` and the process exits N, the same code as
without --json."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

FAILING = [
    ("index", "switch", "nope"),
    ("index", "remove", "nope"),
    ("index", "remove", "nope", "--variant", "ivf-pq"),
    ("index", "verify", "nope"),
    ("index", "quantize", "nope", "--variant", "ivf-pq"),
    ("index", "import", "/nonexistent/passages.jsonl", "--name", "x"),
    ("index", "calibrate", "nope", "/nonexistent/q.jsonl"),
    ("models", "use", "nope"),
    ("models", "remove", "nope"),
    ("models", "remove", "starter"),
    ("models", "download", "nope"),
    ("models", "import", "/nonexistent/model", "--name", "x"),
    ("models", "setup-starter", "--limit", "many"),  # a usage error, from argparse
    ("ask", "   "),
    ("eval", "/nonexistent/q.jsonl"),
    ("train", "/nonexistent/t.jsonl", "--pack", "nope", "--out", "/nonexistent/out"),
]


@pytest.fixture(autouse=True)
def private_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))


@pytest.mark.parametrize("argv", FAILING, ids=lambda a: " ".join(a[:2]))
def test_errors_under_json_are_json(cli, argv: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli(*argv)
    assert code not in (0, 70), (out, err)  # a clear refusal, not a bug
    assert "error:" in err
    json_code, json_out, json_err = cli(*argv, "--json")
    assert json_code == code, (json_out, json_err)
    report = json.loads(json_out)  # stdout is one JSON document and nothing else
    assert set(report) == {"error", "hint", "exit"}
    assert report["exit"] == code
    assert report["error"] and report["error"] in err
    assert "error:" not in json_err and "Traceback" not in json_err


def test_successes_under_json_are_json(cli, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("models", "use", "starter", "--json")
    assert code == 0, err
    assert json.loads(out) == {"chosen": "starter", "installed": True}


@pytest.fixture()
def tiny_snapshot(cli, tiny_models: Any, tmp_path: Path, data_dir: Path) -> Path:  # type: ignore[no-untyped-def]
    from ragdesk.core.app import AppContext
    from ragdesk.core.models.packs import PackSpec, register_pack

    articles = list(tiny_models.corpus[:20])
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in articles),
                   encoding="utf-8")
    code, _, err = cli("index", "import", str(src), "--name", "tiny", "--encoder",
                       str(tiny_models.st_encoder))
    assert code == 0, err
    ctx = AppContext(data_dir)
    register_pack(ctx.catalog, PackSpec(
        name="tiny", kind="custom", question_encoder=str(tiny_models.st_encoder),
        passage_encoder=str(tiny_models.st_encoder), generator=str(tiny_models.causal_lm),
        generator_kind="causal", encoder_family="sentence-transformers"))
    ctx.close()
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"question": f"what about {t}?", "answer": [t]})
                                 + "\n" for t, _ in articles[:8]), encoding="utf-8")
    return questions


def test_switch_and_remove_under_json(cli, tiny_snapshot: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("index", "switch", "tiny", "--json")
    assert code == 0, err
    assert json.loads(out) == {"active": "tiny", "passages": json.loads(out)["passages"],
                               "variant": "flat"}
    code, out, err = cli("index", "remove", "tiny", "--json")
    assert code == 0, err
    assert json.loads(out) == {"removed": "tiny", "variant": None}


def test_eval_reads_questions_from_stdin(cli, tiny_snapshot: Path,  # type: ignore[no-untyped-def]
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ("--snapshot", "tiny", "--pack", "tiny", "--retrieval-only", "--json")
    code, out, err = cli("eval", str(tiny_snapshot), *argv)
    assert code == 0, err
    from_file = json.loads(out)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(tiny_snapshot.read_bytes())))
    code, out, err = cli("eval", "-", *argv)
    assert code == 0, err
    from_stdin = json.loads(out)
    assert from_stdin["n"] == from_file["n"] == 8
    assert from_stdin["top_k_accuracy"] == from_file["top_k_accuracy"]
