"""The status line's time is the answer's own: a question that waited for the models to load
or for an earlier question says how long it waited, apart from how long it took."""

from __future__ import annotations

import re
import threading
from typing import Any

from ragdesk.core.types import Answer
from ragdesk.ui.conversation import finished_text
from tests.ui.probes import ANSWER_TIMEOUT_MS


def test_the_wait_is_said_apart_from_the_answers_own_time() -> None:
    answer = Answer(question="who was the first emperor of rome?", text="Augustus",
                    token_ids=[], tokens=[], docs=[], logprob=-1.0, mode="token",
                    snapshot="wiki-a")
    loading = "the models to load"
    assert finished_text(answer, 1.24, 0.1, loading) == "Answered in 1.2 s from wiki-a."
    assert finished_text(answer, 5.0, 3.0, loading) == \
        "Answered in 2.0 s from wiki-a, after waiting 3.0 s for the models to load."
    answer.cancelled = True
    assert finished_text(answer, 5.0, 0.0, loading) == "Stopped in 5.0 s from wiki-a."


def test_a_question_sent_behind_another_says_how_long_it_waited(
        qtbot: Any, window: Any) -> None:
    w = window
    said: list[str] = []
    w.conversation.activity.connect(said.append)
    w.backend.gate = threading.Event()  # the first answer pauses after its first token
    try:
        with qtbot.waitSignal(w.conversation.tokenStreamed, timeout=ANSWER_TIMEOUT_MS):
            w.conversation.ask("who was the first emperor of rome?", w.params(), snapshot=None)
        second = w.conversation.ask("who built the colosseum?", w.params(), snapshot=None)
        qtbot.wait(1500)
    finally:
        w.backend.gate.set()
    qtbot.waitUntil(lambda: second.state == "done", timeout=ANSWER_TIMEOUT_MS)
    first_line, second_line = [s for s in said if s.startswith("Answered")]
    assert "waiting" not in first_line
    m = re.fullmatch(r"Answered in ([\d.]+) s from wiki-a, after waiting ([\d.]+) s for an "
                     r"earlier question\.", second_line)
    assert m is not None, second_line
    assert float(m.group(2)) >= 1.5
    assert w.status.text.fullText() == second_line and not w.status.text.is_elided()
