"""Hostile text on the command line: terminal escapes in snapshot names, passage
titles and texts never reach the terminal raw, and a question that is not UTF-8 is refused
with a message (exit 2) instead of an internal error (exit 70)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragdesk.cli.common import print_table
from ragdesk.core.errors import BadInputError
from ragdesk.core.terminal_text import terminal_safe

Cli = Callable[..., tuple[int, str, str]]

OSC_TITLE = "\x1b]0;evil\x07"  # sets the terminal window's title
RED = "\x1b[31m"
FAKE_ROW = "evil\n*  fake  ready  999"  # a snapshot name that draws a fake active row


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from a second thread on a busy 2-core machine."""
    import torch

    t = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(t)


# ---- the sanitizer ---------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "shown"), [
    (OSC_TITLE + "Paris", "\\x1b]0;evil\\x07Paris"),
    (RED + "red" + "\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
    ("\x9b2J", "\\x9b2J"),  # C1 CSI, one byte
    ("\x7f\x00", "\\x7f\\x00"),
    ("abc\u202edef", "abc\\u202edef"),  # right-to-left override
    ("line\u2028sep", "line\\u2028sep"),
    ("\udcff\udcfe", "\\udcff\\udcfe"),  # undecodable argv bytes
])
def test_terminal_safe_escapes_what_a_terminal_would_act_on(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown
    assert terminal_safe(raw).isprintable()
    terminal_safe(raw).encode("utf-8")  # writable to a UTF-8 terminal


def test_ordinary_text_is_kept() -> None:
    text = "Zürich 東京 \u200fمرحبا emoji 👍 «quotes» — dash"  # with a right-to-left mark
    assert terminal_safe(text) == text


def test_newlines_can_stay_in_multi_line_text() -> None:
    assert terminal_safe("one\ntwo\tthree" + RED, newlines=True) == "one\ntwo\tthree\\x1b[31m"


def test_a_table_row_stays_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(["", "name"], [["*", "real"], ["", FAKE_ROW]])
    out = capsys.readouterr().out
    assert [line.rstrip() for line in out.splitlines()] == [
        "   name", "*  real", "   evil\\n*  fake  ready  999"]


# ---- index list ------------------------------------------------------------------------------

def _write_jsonl(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in rows),
                    encoding="utf-8")
    return path


def test_index_list_shows_a_hostile_name_escaped(cli: Cli, tiny_models: Any,
                                                 tmp_path: Path) -> None:
    src = _write_jsonl(tmp_path / "c.jsonl", [(f"T{i}", f"text of passage {i}") for i in range(5)])
    name = FAKE_ROW + OSC_TITLE
    code, _out, err = cli("index", "import", str(src), "--name", name, "--encoder",
                          str(tiny_models.ctx_encoder))
    assert code == 0, err
    code, out, err = cli("index", "list")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    lines = out.splitlines()
    assert len(lines) == 2, out  # the header and one row: no fake row
    assert "evil\\n*  fake  ready  999\\x1b]0;evil\\x07" in lines[1]
    # JSON keeps the real name (it is escaped by JSON itself).
    code, out, err = cli("index", "list", "--json")
    assert json.loads(out)[0]["name"] == name


# ---- ask -------------------------------------------------------------------------------------

SNAP = "hostile"


@pytest.fixture()
def hostile_snapshot(data_dir: Path, tiny_models: Any) -> Path:
    """An active snapshot whose passages carry escape sequences in titles and texts."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot

    # Short texts: `ask` shortens each to 160 characters.
    rows = [(OSC_TITLE + t, RED + " ".join(x.split()[:8]) + "\x1b[0m\r\x9b2J")
            for t, x in tiny_models.corpus[:6]]
    src = _write_jsonl(data_dir.parent / "hostile.jsonl", rows)
    app = AppContext(data_dir)
    try:
        import_snapshot(app.data, app.catalog, src, name=SNAP,
                        encoder=str(tiny_models.ctx_encoder), fmt="jsonl")
        app.catalog.set_active(SNAP)
    finally:
        app.close()
    return data_dir


def test_ask_prints_hostile_titles_and_texts_escaped(cli: Cli, hostile_snapshot: Path,
                                                     tiny_models: Any) -> None:
    code, out, err = cli("ask", "who wrote the first book", "--question-encoder",
                         str(tiny_models.question_encoder), "--generator",
                         str(tiny_models.bart), "--docs", "3", "--max-new-tokens", "4")
    assert code == 0, err
    assert "Sources:" in out
    for ch in ("\x1b", "\x07", "\x9b", "\r"):
        assert ch not in out, repr(ch)
    assert out.count("\\x1b]0;evil\\x07") == 3  # each of the 3 titles, visibly
    assert "\\x1b[31m" in out and "\\x9b2J" in out


# ---- a question that is not UTF-8 ------------------------------------------------------------

def test_ask_with_undecodable_bytes_is_refused_before_any_model_loads(tmp_path: Path) -> None:
    """`ragdesk ask $'\\xff\\xfe'` ended in "internal error: TypeError" (exit 70)."""
    env = dict(os.environ, LC_ALL="C.UTF-8")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ragdesk", "--data-dir", str(tmp_path / "d"),
                           "ask", b"\xff\xfe"], capture_output=True, env=env, timeout=300)
    err = proc.stderr.decode("utf-8", "backslashreplace")
    assert proc.returncode == 2, err
    assert "not valid UTF-8" in err and "0xff" in err
    assert "internal error" not in err
    assert time.monotonic() - start < 60  # no model was loaded (that takes far longer here)


def test_ask_with_a_lone_surrogate_is_refused(cli: Cli) -> None:
    code, _out, err = cli("ask", "who wrote \ud800 hamlet")
    assert code == 2, err
    assert "not valid UTF-8" in err and "U+D800" in err


def test_the_api_refuses_a_lone_surrogate(hostile_snapshot: Path, tiny_models: Any) -> None:
    from ragdesk import load_engine

    engine = load_engine(question_encoder=str(tiny_models.question_encoder),
                         generator=str(tiny_models.bart), data_dir=hostile_snapshot)
    try:
        with pytest.raises(BadInputError, match="not valid UTF-8") as info:
            engine.answer("who wrote \udce9 hamlet", n_docs=2, max_new_tokens=2)
        assert info.value.exit_code == 2
        with pytest.raises(BadInputError, match="must be text"):
            engine.answer(b"who wrote hamlet", n_docs=2, max_new_tokens=2)  # type: ignore[arg-type]
    finally:
        engine.close()
