"""`ragdesk ask` start-up: every check that needs no model runs before a model loads, the
snapshot and pack in use are named, loading is quiet unless -v, and -v reports timings."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_ask import SNAP, _models, snapshot_dir  # noqa: F401  (fixture)


@pytest.fixture()
def no_loading(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Model loaders that record the call and fail: a pre-load check must never reach them."""
    from ragdesk.core.models import loading

    calls: list[str] = []

    def refuse(name: str) -> Any:
        def fn(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} called before the checks finished")
        return fn

    for name in ("load_generator", "load_question_encoder", "load_generator_parts"):
        monkeypatch.setattr(loading, name, refuse(name))
    return calls


def _fails_before_loading(cli: Any, calls: list[str], *argv: str) -> str:
    t0 = time.perf_counter()
    code, _, err = cli("ask", *argv)
    elapsed = time.perf_counter() - t0
    assert code != 0, err
    assert calls == []
    assert "Traceback" not in err and "internal error" not in err
    assert elapsed < 1.0, f"a pre-load check took {elapsed:.2f} s"
    return str(err)


def test_no_active_snapshot_fails_at_once(cli: Any, no_loading: list[str]) -> None:
    cli("index", "list")  # creates the empty data directory (not timed)
    err = _fails_before_loading(cli, no_loading, "who wrote hamlet")
    assert "No snapshot is active" in err


@pytest.mark.parametrize(("args", "message"), [
    (["--docs", "0"], "at least 1"),
    (["--beams", "0"], "at least 1"),
    (["--max-new-tokens", "0"], "at least 1"),
    (["--snapshot", "nope"], "nope"),
    (["--pack", "no-such-pack"], "no-such-pack"),
])
def test_bad_options_fail_before_any_model_loads(cli: Any, snapshot_dir: Path,  # noqa: F811
                                                 tiny_models: Any, no_loading: list[str],
                                                 args: list[str], message: str) -> None:
    cli("index", "list")  # warm imports, so that the timing is the check itself
    err = _fails_before_loading(cli, no_loading, "who?", *args, *_models(tiny_models))
    assert message in err


def test_pack_of_another_encoder_fails_before_loading(cli: Any, snapshot_dir: Path,  # noqa: F811
                                                      no_loading: list[str]) -> None:
    """The tiny snapshot holds DPR vectors (32-d); the starter pack asks in MiniLM's 384-d
    space."""
    cli("index", "list")
    err = _fails_before_loading(cli, no_loading, "who?", "--pack", "starter")
    assert SNAP in err and ("encoder" in err.lower())


def test_damaged_snapshot_fails_before_loading(cli: Any, snapshot_dir: Path,  # noqa: F811
                                               tiny_models: Any,
                                               no_loading: list[str]) -> None:
    snap = next(p for p in (snapshot_dir / "snapshots").iterdir() if p.is_dir())
    (snap / "manifest.json").unlink()
    err = _fails_before_loading(cli, no_loading, "who?", *_models(tiny_models))
    assert SNAP in err


def test_unknown_precision_in_the_settings_fails_before_loading(
        cli: Any, snapshot_dir: Path, tiny_models: Any,  # noqa: F811
        no_loading: list[str]) -> None:
    settings = snapshot_dir / "settings.json"
    data = json.loads(settings.read_text()) if settings.exists() else {}
    data["generator_precision"] = "int3"
    settings.write_text(json.dumps(data))
    err = _fails_before_loading(cli, no_loading, "who?", *_models(tiny_models))
    assert "int3" in err


def test_names_snapshot_and_models_and_stays_quiet(cli: Any, snapshot_dir: Path,  # noqa: F811
                                                   tiny_models: Any) -> None:
    code, out, err = cli("ask", "who wrote the first book", *_models(tiny_models), "--docs",
                         "2", "--max-new-tokens", "4")
    assert code == 0, err
    assert f"snapshot {SNAP!r}" in err and "10 passages" in err
    assert "Loading weights" not in err  # transformers' progress bars only with -v
    assert "Sources:" in out


def test_verbose_reports_load_and_answer_time(cli: Any, snapshot_dir: Path,  # noqa: F811
                                              tiny_models: Any) -> None:
    code, _, err = cli("-v", "ask", "who wrote the first book", *_models(tiny_models),
                       "--docs", "2", "--max-new-tokens", "4")
    assert code == 0, err
    assert "loaded the question encoder in" in err and "answered in" in err
    assert "first token after" in err


def test_json_names_pack_and_precision(cli: Any, snapshot_dir: Path,  # noqa: F811
                                       tiny_models: Any) -> None:
    code, out, err = cli("ask", "who wrote the first book", *_models(tiny_models), "--docs",
                         "2", "--max-new-tokens", "3", "--json", "--precision", "int8")
    assert code == 0, err
    ans = json.loads(out)
    assert ans["precision"] == "float32"  # BART has no int8 path: it says what really ran
    # loading is reported apart from the answer's own timings, for scripts that compare them
    assert set(ans["load_s"]) == {"question_encoder_s", "generator_s"}
    assert all(v > 0 for v in ans["load_s"].values())


def test_a_gemma_generator_runs_in_int8_when_asked(cli: Any, snapshot_dir: Path,  # noqa: F811
                                                   tiny_models: Any) -> None:
    from ragdesk.core.engine import causal_decoder

    if tiny_models.gemma3 is None or not causal_decoder.int8_available():
        pytest.skip("no Gemma 3 or no int8 kernels here")
    code, out, err = cli("ask", "who wrote the first book", "--question-encoder",
                         str(tiny_models.question_encoder), "--generator",
                         str(tiny_models.gemma3), "--docs", "2", "--max-new-tokens", "3",
                         "--json", "--precision", "int8")
    assert code == 0, err
    assert json.loads(out)["precision"] == "int8"
    shutil.rmtree(snapshot_dir / "logs", ignore_errors=True)


def test_human_mode_streams_tokens_as_they_come(cli: Any, snapshot_dir: Path,  # noqa: F811
                                                tiny_models: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """To a terminal: each token is written (and flushed) when the engine decides it, and
    the answer is not printed a second time."""
    from ragdesk.cli import ask_cmd

    monkeypatch.setattr(ask_cmd, "_stdout_is_terminal", lambda: True)
    seen: list[str] = []
    real = ask_cmd._StdoutStream.__call__

    def record(self: Any, tok: Any) -> None:
        seen.append(tok.text)
        real(self, tok)

    monkeypatch.setattr(ask_cmd._StdoutStream, "__call__", record)
    code, out, err = cli("ask", "who wrote the first book", *_models(tiny_models), "--docs",
                         "2", "--max-new-tokens", "5")
    assert code == 0, err
    text = "".join(seen)
    assert seen and text.strip()
    head = out.split("\n\nRAG-Token", 1)[0]
    # the streamed answer once, then how far to trust it
    answer, verdict = head.strip().split("\n\n")
    assert answer == text.strip()
    assert verdict.startswith("Confidence unknown")


def test_into_a_pipe_a_guess_is_never_the_first_line(cli: Any, snapshot_dir: Path,  # noqa: F811
                                                     tiny_models: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing streams into a pipe or a file: an answer that abstains starts with the
    not-found message, its guess on a line of its own after it; to a terminal the streamed
    guess is followed by the same lines."""
    import ragdesk.core.session as session
    from ragdesk.cli import ask_cmd
    from ragdesk.core.confidence import not_found_message

    real = session.answer_from_ready

    def abstaining(*args: Any, **kw: Any) -> Any:
        ans = real(*args, **kw)
        ans.abstained = True
        return ans

    monkeypatch.setattr(session, "answer_from_ready", abstaining)
    args = ("ask", "who wrote the first book", *_models(tiny_models), "--docs", "2",
            "--max-new-tokens", "5")
    code, out, err = cli(*args)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == not_found_message(SNAP)
    assert lines[1].startswith("Best guess: ") and len(lines[1]) > len("Best guess: ")
    guess = lines[1].removeprefix("Best guess: ")
    monkeypatch.setattr(ask_cmd, "_stdout_is_terminal", lambda: True)
    code, out, err = cli(*args)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == guess and lines[2] == not_found_message(SNAP)
