"""Normalization and metrics: hand-checked cases plus the official SQuAD v1.1 code as reference."""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from pathlib import Path

import pytest

from ragdesk.core.evaluation.metrics import (
    AnswerMatcher,
    exact_match,
    first_hit_rank,
    has_answer,
    passage_string,
    token_f1,
    top_k_accuracy,
)
from ragdesk.core.matching import match_tokens, normalize_answer


# The reference: normalize_answer / f1_score copied verbatim (modulo style) from the SQuAD v1.1
# evaluation script (https://rajpurkar.github.io/SQuAD-explorer/), which DPR and RAG reuse.
def squad_normalize(s: str) -> str:
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def squad_f1(prediction: str, ground_truth: str) -> float:
    prediction_tokens = squad_normalize(prediction).split()
    ground_truth_tokens = squad_normalize(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Beatles!", "beatles"),
        ("  A  tale of   two cities. ", "tale of two cities"),
        ("U.S.A.", "usa"),
        ("Theatre of the Absurd", "theatre of absurd"),
        ("an apple a day", "apple day"),
        ("14 December 1972 UTC", "14 december 1972 utc"),
        ("Bob's-Burgers", "bobsburgers"),
        ("THE", ""),
        ("\tNew\nYork ", "new york"),
    ],
)
def test_normalize_hand_checked(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_normalize_matches_squad_reference_on_dev_answers(nq_dev_path: Path) -> None:
    answers: list[str] = []
    with open(nq_dev_path, encoding="utf-8") as fh:
        for line in fh:
            answers.extend(json.loads(line)["answer"])
    assert len(answers) > 3000
    for a in answers:
        assert normalize_answer(a) == squad_normalize(a), a


def test_exact_match_hand_checked() -> None:
    assert exact_match("the Eiffel Tower", ["Eiffel tower"]) == 1.0
    assert exact_match("Eiffel Tower.", ["Louvre", "eiffel  tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert exact_match("", ["the"]) == 1.0  # both normalize to the empty string
    assert exact_match("anything", []) == 0.0


def test_token_f1_hand_checked() -> None:
    # pred tokens: bobby scott and bob russell (5); gold: bobby scott (2); 2 in common.
    # P = 2/5, R = 1, F1 = 2 * 0.4 / 1.4
    assert token_f1("Bobby Scott and Bob Russell", ["Bobby Scott"]) == pytest.approx(0.8 / 1.4)
    # repeated tokens count once per gold occurrence: P = 2/3, R = 1 -> 0.8
    assert token_f1("new new york", ["New York"]) == pytest.approx(0.8)
    # best gold answer wins
    assert token_f1("December 1972", ["14 December 1972 UTC", "December 1972"]) == 1.0
    assert token_f1("moon", ["December 1972"]) == 0.0
    assert token_f1("", ["a"]) == 1.0 and token_f1("", ["x"]) == 0.0


def test_token_f1_matches_squad_reference() -> None:
    rng = random.Random(3)
    words = ["the", "a", "new", "york", "city", "1972", "U.S.", "Bob", "bob", "scott", "an"]
    for _ in range(2000):
        pred = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        golds = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 5)))
                 for _ in range(rng.randint(1, 3))]
        # squad_f1 returns 0 when either side normalizes to nothing; skip those edge cases,
        # which the hand-checked test above covers.
        if not squad_normalize(pred) or not all(squad_normalize(g) for g in golds):
            continue
        assert token_f1(pred, golds) == pytest.approx(max(squad_f1(pred, g) for g in golds))


@pytest.mark.parametrize(
    ("passage", "answers", "expected"),
    [
        ("Apollo 17 left the Moon on 14 December 1972 UTC.", ["December 1972"], True),
        ("The year 19721 is not a year we know.", ["1972"], False),
        ("The Scottish parliament met.", ["Scott"], False),
        ("He served in the U.S. Army.", ["U.S."], True),
        ("He served in the U.S. Army.", ["us army"], True),
        ("The Beatles were a band.", ["the"], False),  # normalizes to nothing
        ("Beyonce\u0301 sang.", ["Beyonc\u00e9"], True),  # decomposed vs precomposed
        ("A tale of two cities", ["Tale of Two Cities"], True),
        ("new york", ["york new"], False),
        # words split at dashes, as DPR's tokenizer splits them
        ("The New Deal was a 1933\u20131938 series of reforms.", ["1933"], True),
        ("The New Deal was a 1933-1938 series of reforms.", ["1938"], True),
        ("The New Deal was a 1933-1938 series of reforms.", ["1933\u20131938"], True),
        ("Coca-Cola is a drink.", ["Coca Cola"], True),
        ("The 19331938 series.", ["1933-1938"], False),
    ],
)
def test_has_answer_hand_checked(passage: str, answers: list[str], expected: bool) -> None:
    assert has_answer("Some title", passage, answers) is expected


def test_has_answer_searches_the_title_too_but_never_across_it() -> None:
    assert has_answer("Hamlet", "A tragedy by Shakespeare.", ["hamlet"])
    assert not has_answer("Prince Hamlet", "Hamlet is a tragedy.", ["Hamlet Hamlet"])
    assert has_answer("Prince Hamlet", "Hamlet Hamlet is a tragedy.", ["Hamlet Hamlet"])


def _naive_has_answer(title: str, passage: str, answers: list[str]) -> bool:
    for p in (match_tokens(title), match_tokens(passage)):
        for a in answers:
            t = match_tokens(a)
            if not t:
                continue
            for i in range(len(p) - len(t) + 1):
                if p[i:i + len(t)] == t:
                    return True
    return False


def test_has_answer_matches_a_naive_token_subsequence_loop() -> None:
    rng = random.Random(7)
    words = ["a", "the", "Rome", "rome's", "empire", "1453", "fall", "of", "byzantine", "x"]
    matcher_hits = 0
    for _ in range(3000):
        passage = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        answers = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
                   for _ in range(rng.randint(1, 2))]
        title = rng.choice(["Rome", "Fall of Rome", ""])
        expected = _naive_has_answer(title, passage, answers)
        got = AnswerMatcher(answers).matches(passage_string(title, passage))
        assert got == expected, (passage, answers)
        matcher_hits += got
    assert 300 < matcher_hits < 2700  # both outcomes exercised


def test_top_k_accuracy_and_first_hit_rank() -> None:
    assert first_hit_rank([False, False, True, True]) == 2
    assert first_hit_rank([False]) is None
    acc = top_k_accuracy([0, 3, None, 19, 20])
    assert acc == {"1": 0.2, "5": 0.4, "20": 0.6, "100": 0.8}
    assert top_k_accuracy([], ks=(1, 5)) == {"1": None, "5": None}
