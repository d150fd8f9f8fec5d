"""JSON and JSONL from outside ended in internal errors or unbounded memory.

- an array 100k deep or an object 40k deep (under 256 KB) raised RecursionError (exit 70)
  from ``index import``, ``calibrate``, ``eval`` and ``encode``'s reader;
- a lone surrogate (``"\\ud800"``) in a line gave exit 70 from ``index import``,
  ``calibrate`` and ``eval --retrieval-only``;
- ``calibrate`` and ``eval`` given ``/dev/zero`` (a stream without a newline) grew to 5-6 GB.

Every one must be a clear refusal naming the file and line, exit 2, in bounded memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragdesk.core.errors import BadInputError
from ragdesk.core.safe_json import iter_lines_bounded, loads_bounded
from tests.redteam.peak_rss import SCRIPT, peak_kb

DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 40_000 + "1" + "}" * 40_000
SURROGATE = '"\\ud800"'


def _passages_with(tmp_path: Path, bad_line: str) -> Path:
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps({"title": "ok", "text": "a fine passage"}) + "\n"
                   + bad_line + "\n", encoding="utf-8")
    return src


def _questions_with(tmp_path: Path, bad_line: str) -> Path:
    src = tmp_path / "q.jsonl"
    src.write_text(json.dumps({"question": "who", "answer": ["x"]}) + "\n" + bad_line + "\n",
                   encoding="utf-8")
    return src


BAD_PASSAGES = {
    "deep-array": '{"title": "t", "text": "x", "extra": ' + DEEP_ARRAY + "}",
    "deep-object": DEEP_OBJECT,
    "surrogate-text": '{"title": "t", "text": ' + SURROGATE + "}",
    "surrogate-title": '{"title": "\\udcff", "text": "x"}',
    "huge-number": '{"title": "t", "text": "x", "id": ' + "9" * 5000 + "}",
}
EXPECT = {"deep-array": "nested more than", "deep-object": "nested more than",
          "surrogate-text": "unpaired surrogate", "surrogate-title": "unpaired surrogate",
          "huge-number": "more digits"}


@pytest.mark.parametrize("kind", sorted(BAD_PASSAGES))
def test_index_import_refuses_hostile_lines(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                            kind: str) -> None:
    src = _passages_with(tmp_path, BAD_PASSAGES[kind])
    code, out, err = cli("index", "import", str(src), "--name", "x", "--encoder",
                         str(tiny_models.st_encoder))
    assert code == 2, (out, err)
    assert f"{src}, line 2" in err and EXPECT[kind] in err, err
    assert "internal error" not in err


BAD_QUESTIONS = {
    "deep-array": '{"question": "q", "answer": ' + DEEP_ARRAY + "}",
    "deep-object": DEEP_OBJECT,
    "surrogate": '{"question": ' + SURROGATE + ', "answer": ["x"]}',
    "surrogate-answer": '{"question": "q", "answer": ["\\udc80"]}',
}


@pytest.mark.parametrize("command", ["calibrate", "eval"])
@pytest.mark.parametrize("kind", sorted(BAD_QUESTIONS))
def test_question_files_refuse_hostile_lines(cli, tmp_path: Path, command: str,  # type: ignore[no-untyped-def]
                                             kind: str) -> None:
    src = _questions_with(tmp_path, BAD_QUESTIONS[kind])
    argv = (("index", "calibrate", "nope", str(src)) if command == "calibrate"
            else ("eval", str(src), "--retrieval-only"))
    code, out, err = cli(*argv)
    assert code == 2, (out, err)
    assert f"{src}, line 2" in err, err
    assert ("nested more than" if kind.startswith("deep") else "unpaired surrogate") in err


def test_encode_reader_refuses_deep_json(tmp_path: Path) -> None:
    from ragdesk.core.distributed.reader import count_passages

    src = _passages_with(tmp_path, BAD_PASSAGES["deep-array"])
    with pytest.raises(BadInputError, match="nested more than"):
        count_passages(str(src), None, None)


def test_format_sniffing_survives_a_deep_first_line(cli, tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "p.json"  # no .jsonl suffix: the first line is parsed to tell the format
    src.write_text(DEEP_OBJECT[:60_000] + "\n", encoding="utf-8")
    code, out, err = cli("index", "import", str(src), "--name", "x", "--encoder",
                         str(tiny_models.st_encoder))
    assert code == 2, (out, err)
    assert "internal error" not in err


# ---- endless streams -------------------------------------------------------------------

_RSS_SCRIPT = SCRIPT


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("argv", [("index", "calibrate", "nope", "/dev/zero"),
                                  ("eval", "/dev/zero", "--retrieval-only")],
                         ids=["calibrate", "eval"])
def test_endless_stream_is_refused_in_bounded_memory(tmp_path: Path,
                                                     argv: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, "--data-dir", str(tmp_path / "data"), *argv],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "RAGDESK_DATA_DIR": str(tmp_path / "data")})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "no line break" in proc.stderr and "/dev/zero, line 1" in proc.stderr
    peak = peak_kb(proc.stderr)
    assert peak < 1024 * 1024, f"peak RSS {peak / 1024:.0f} MB"


def test_eval_from_stdin_endless_stream(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run(
            [sys.executable, "-m", "ragdesk", "--data-dir", str(tmp_path / "data"), "eval",
             "-", "--retrieval-only"], stdin=zero, capture_output=True, text=True,
            timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "no line break" in proc.stderr


# ---- the layer itself ------------------------------------------------------------------

def test_loads_bounded_limits() -> None:
    assert loads_bounded("[" * 64 + "]" * 64) is not None
    with pytest.raises(BadInputError, match="nested more than 64"):
        loads_bounded("[" * 65 + "]" * 65)
    # brackets inside strings do not nest, escaped quotes do not end a string
    assert loads_bounded(json.dumps({"t": "[" * 1000 + '\\"' + "{" * 1000})) is not None
    assert loads_bounded('"\\ud83d\\ude00"') == "\U0001f600"  # a pair is text
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        loads_bounded('{"\\udfff": 1}')
    with pytest.raises(BadInputError, match="unpaired surrogate"):
        loads_bounded("\"\ud800\"")
    with pytest.raises(BadInputError, match="larger than"):
        loads_bounded(b"[1]" * 10, max_bytes=8)
    with pytest.raises(BadInputError, match="not UTF-8"):
        loads_bounded(b'"\xff"')
    assert loads_bounded(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}
    with pytest.raises(BadInputError, match="more digits"):
        loads_bounded('{"n": ' + "9" * 5000 + "}")
    # a string still open at the end, or ending in a lone backslash, opens no bracket
    with pytest.raises(BadInputError, match="nested more than 64"):
        loads_bounded("[" * 65 + '"abc\\')
    with pytest.raises(BadInputError, match="not valid JSON"):
        loads_bounded('"' + "[" * 100 + "\\")


def test_a_string_never_closed_is_read_once_not_once_per_quote() -> None:
    """Brackets, then a quote never closed, then escaped quotes: the depth check scanned to
    the end of the text from every one of them (a 256 KB request body held a server's event
    loop for minutes). In one pass it takes milliseconds; the bound only catches a hang."""
    import threading

    text = "[]" * 40 + '"' + '\\"' * 500_000  # 1 MB
    got: list[BaseException] = []

    def parse() -> None:
        try:
            loads_bounded(text, max_depth=32)
        except BadInputError as exc:
            got.append(exc)

    worker = threading.Thread(target=parse, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive() and len(got) == 1 and "not valid JSON" in str(got[0])


def test_line_reader_bounds_a_line(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"a\n" + b"x" * 99 + b"\n" + b"y" * 101)
    with open(p, "rb") as fh:
        lines = iter_lines_bounded(fh, max_line_bytes=100, path=p)
        assert next(lines) == (1, b"a\n")
        assert next(lines) == (2, b"x" * 99 + b"\n")
        with pytest.raises(BadInputError, match="line 3: is longer than 100 bytes"):
            next(lines)
