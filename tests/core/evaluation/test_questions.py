"""The NQ-open JSONL reader: good files, and malformed lines named by file and line number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragdesk.core.errors import BadInputError
from ragdesk.core.evaluation.questions import read_questions

GOOD = [
    {"question": "when was the last time anyone was on the moon",
     "answer": ["14 December 1972 UTC", "December 1972"]},
    {"question": "who wrote hamlet", "answer": ["William Shakespeare"]},
]


def _write(tmp_path: Path, lines: list[str], name: str = "q.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_reads_questions_and_keeps_line_numbers(tmp_path: Path) -> None:
    p = _write(tmp_path, [json.dumps(GOOD[0]), "", "   ", json.dumps(GOOD[1])])
    qs = read_questions(p)
    assert [q.question for q in qs] == [g["question"] for g in GOOD]
    assert qs[0].answers == ("14 December 1972 UTC", "December 1972")
    assert [q.line for q in qs] == [1, 4]


def test_limit_and_alternative_spellings(tmp_path: Path) -> None:
    p = _write(tmp_path, [json.dumps({"question": "q1", "answers": ["a1"]}),
                          json.dumps({"question": "q2", "answer": "a2"}),
                          json.dumps(GOOD[1])])
    qs = read_questions(p, limit=2)
    assert [(q.question, q.answers) for q in qs] == [("q1", ("a1",)), ("q2", ("a2",))]


def test_reads_the_shared_dev_set(nq_dev_path: Path) -> None:
    qs = read_questions(nq_dev_path)
    assert len(qs) == 3610
    assert all(q.answers for q in qs)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ('{"question": "who", "answer": ["x"]', "not valid JSON"),
        ('["who", ["x"]]', "expected a JSON object"),
        ('{"answer": ["x"]}', '"question"'),
        ('{"question": "  ", "answer": ["x"]}', '"question"'),
        ('{"question": "who"}', '"answer"'),
        ('{"question": "who", "answer": []}', '"answer"'),
        ('{"question": "who", "answer": [1972]}', '"answer"'),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad: str, fragment: str) -> None:
    p = _write(tmp_path, [json.dumps(GOOD[0]), "", bad, json.dumps(GOOD[1])])
    with pytest.raises(BadInputError) as info:
        read_questions(p)
    err = info.value
    assert err.line == 3
    assert err.path == p
    assert f"{p}, line 3: " in err.message
    assert fragment in err.message
    assert "question" in err.hint  # tells the user what a line should look like


def test_missing_empty_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        read_questions(tmp_path / "nope.jsonl")
    with pytest.raises(BadInputError, match="holds no questions"):
        read_questions(_write(tmp_path, [""], "empty.jsonl"))
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(json.dumps(GOOD[0]).encode() + b"\n\xff\xfe\x00\n")
    with pytest.raises(BadInputError, match="line 2") as info:
        read_questions(binary)
    assert info.value.line == 2
    with pytest.raises(BadInputError, match="limit"):
        read_questions(_write(tmp_path, [json.dumps(GOOD[0])]), limit=0)
