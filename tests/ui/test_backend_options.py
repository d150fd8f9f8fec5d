"""The backend hands the engine the user's whole answer options, not a copy of some."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ragdesk.core.options import AnswerOptions
from ragdesk.core.progress import CancelToken
from ragdesk.ui.backend import Backend


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any], AnswerOptions, dict[str, Any]]] = []

    def ask_from_docs(self, question: str, docs: list[Any], options: AnswerOptions,
                      **kw: Any) -> str:
        self.calls.append((question, docs, options, kw))
        return "answered"


def test_answer_from_chosen_passages_keeps_the_temperature_and_every_option() -> None:
    recorder = _Recorder()

    class _Backend(Backend):
        def engine(self, pack: str) -> Any:
            return recorder

    backend = _Backend(SimpleNamespace(catalog=None))  # type: ignore[arg-type]
    params = AnswerOptions(temperature=0.5, num_beams=2, max_new_tokens=7)
    # the recorder's "answered", not an Answer
    out: object = backend.answer_from_docs("q?", [], params, pack="starter", snapshot="s",
                                           on_token=None, cancel=CancelToken())
    assert out == "answered"
    (question, _, options, kw), = recorder.calls
    assert question == "q?" and options == params and options.temperature == 0.5
    assert kw["snapshot_name"] == "s"
