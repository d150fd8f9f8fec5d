"""Reader for NQ-open style question files: one ``{"question": str, "answer": [str, ...]}``
object per line (``"answers"`` is accepted too, as some exports spell it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ragdesk.core.errors import BadInputError
from ragdesk.core.safe_json import iter_lines_bounded, loads_bounded

_HINT = ('Each line must be a JSON object like {"question": "who wrote hamlet", '
         '"answer": ["William Shakespeare"]}.')


@dataclass(frozen=True)
class Question:
    question: str
    answers: tuple[str, ...]
    line: int  # 1-based line number in the file, for reports


def _parse_line(raw: str, path: Path, line_no: int) -> Question:
    obj = loads_bounded(raw, path=path, line=line_no, hint=_HINT)
    if not isinstance(obj, dict):
        raise BadInputError(f"expected a JSON object, found {type(obj).__name__}.",
                            path=path, line=line_no, hint=_HINT)
    q = obj.get("question")
    if not isinstance(q, str) or not q.strip():
        raise BadInputError('the "question" field is missing or not a non-empty string.',
                            path=path, line=line_no, hint=_HINT)
    key = "answer" if "answer" in obj else "answers"
    ans = obj.get(key)
    if isinstance(ans, str):
        ans = [ans]
    if (not isinstance(ans, list) or not ans
            or not all(isinstance(a, str) for a in ans)):
        raise BadInputError('the "answer" field is missing or not a non-empty list of strings.',
                            path=path, line=line_no, hint=_HINT)
    return Question(question=q.strip(), answers=tuple(ans), line=line_no)


_QUESTIONS_HINT = f"Give the path of a questions file (.jsonl). {_HINT}"


def read_questions(path: str | os.PathLike[str], limit: int | None = None,
                   stream: BinaryIO | None = None) -> list[Question]:
    """Read questions in file order; blank lines are skipped, anything else malformed raises
    :class:`BadInputError` naming the file and the 1-based line. With ``stream`` (stdin for
    ``eval -``) the lines come from it and ``path`` only names it in messages."""
    p = Path(path)
    if limit is not None and limit < 1:
        raise BadInputError(f"--limit must be at least 1, not {limit}.")
    try:
        # Closed below; bytes so that decode errors get a line number.
        fh = open(p, "rb") if stream is None else stream  # noqa: SIM115
    except FileNotFoundError as exc:
        raise BadInputError("no such file.", path=p, hint=_QUESTIONS_HINT) from exc
    except IsADirectoryError as exc:
        raise BadInputError("is a folder, not a file.", path=p, hint=_QUESTIONS_HINT) from exc
    except OSError as exc:
        raise BadInputError(f"cannot be read: {exc.strerror or exc}.", path=p,
                            hint=_QUESTIONS_HINT) from exc
    out: list[Question] = []
    with fh:
        for line_no, raw_bytes in iter_lines_bounded(fh, path=p):
            try:
                raw = raw_bytes.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise BadInputError("is not UTF-8 text.", path=p, line=line_no,
                                    hint=_HINT) from exc
            if not raw.strip():
                continue
            out.append(_parse_line(raw, p, line_no))
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise BadInputError("holds no questions.", path=p, hint=_HINT)
    return out
