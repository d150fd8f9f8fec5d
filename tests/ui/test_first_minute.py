"""The first minute of a new user: a question asked while the starter pack is being set up
waits in a visible queue, is answered with BM25 as soon as the passages are searchable and the
generator is ready, and dense retrieval takes over when the vectors are done. No error."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.types import Answer
from ragdesk.ui.backend import Backend
from ragdesk.ui.ops import Lane
from tests.ui.conftest import open_window
from tests.ui.probes import no_error

ANSWER_TIMEOUT_MS = 180_000


def plain_text(label_text: str) -> str:
    """A label's words with the no-break spaces and joiners the layout uses removed."""
    return label_text.replace("\xa0", " ").replace("\u2060", "")


def red_pixels(widget: Any) -> int:
    """How many of the widget's pixels are clearly red (an error's colour)."""
    image = widget.grab().toImage()
    return sum(1 for y in range(image.height()) for x in range(image.width())
               if (c := image.pixelColor(x, y)).red() - max(c.green(), c.blue()) > 80)


class StarterBackend(Backend):
    """The real Backend and the real staged setup (importer, BM25, catalog, gate), with the
    starter's models replaced by tiny ones: a tiny sentence-transformers encoder (passages
    and questions) and a tiny causal LM, over the first 40 Vital Articles."""

    starter_limit = 40
    parts: tuple[Any, Any] | None = None

    def engine(self, pack: str) -> Any:
        assert self.parts is not None
        self.setup.wait()
        library = self.library()
        with self._engine_lock:
            if self._engine is None:
                from ragdesk.core.engine import Engine

                self._engine = Engine(*self.parts, library=library)
                self._engine_pack = pack
            return self._engine


@pytest.fixture()
def starter_window(qtbot: Any, tmp_path: Path, tiny_models: Any,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, dict[str, Any]]]:
    from ragdesk.core.encoders import load_encoder
    from ragdesk.core.models import load_generator, starter

    release = {"generator": threading.Event(), "vectors": threading.Event()}
    passages = load_encoder(tiny_models.st_encoder)
    plain = passages.encode_tokenized

    def held_back(rows: Any) -> Any:
        # The dense stage waits for the test, so that the BM25 stage is what answers.
        release["vectors"].wait(120)
        return plain(rows)

    passages.encode_tokenized = held_back  # type: ignore[method-assign]
    monkeypatch.setattr(starter, "load_encoder", lambda role="passage": passages)

    def prepare_generator(data: Any, progress: Any = None, cancel: Any = None,
                          **kept: Any) -> None:
        assert kept.get("keep_loaded") is True  # the app's first question reuses it
        release["generator"].wait(120)

    monkeypatch.setattr(starter, "prepare_generator", prepare_generator)
    StarterBackend.parts = (load_encoder(tiny_models.st_encoder, role="question"),
                            load_generator(str(tiny_models.causal_lm)))
    w = open_window(qtbot, tmp_path / "data", StarterBackend)
    yield w, release
    for ev in release.values():
        ev.set()
    w.shutdown()
    w.backend.ctx.close()


def test_a_question_asked_during_setup_waits_then_is_answered_with_bm25(
        qtbot: Any, starter_window: tuple[Any, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    window, release = starter_window
    # the tiny setup may be done within the half second a status line leaves unsaid
    monkeypatch.setattr("ragdesk.ui.conversation.WAIT_WORTH_SAYING_S", 0.0)
    assert window.backend.needs_first_run()
    # As in the issue: Start in the welcome dialog, "Continue in the background", then ask.
    dialog = window.open_first_run()
    assert dialog.starter.isChecked()
    dialog.start()
    job = dialog.job
    assert job is not None and "background" in dialog.later.text()
    qtbot.waitUntil(lambda: window.backend.setup.pending, timeout=10_000)
    dialog.later.click()
    assert not dialog.isVisible()

    said: list[str] = []
    window.conversation.activity.connect(said.append)
    window.question.setPlainText("Which city is the capital of France?")
    card = window.send()
    assert card is not None
    # Queued, visibly, with the setup's progress; not failed, no dialog.
    qtbot.waitUntil(lambda: "Waiting for the starter pack" in card.status_label.text(),
                    timeout=30_000)
    cat = window.backend.catalog
    qtbot.waitUntil(lambda: (cat.find_snapshot("vital-articles") is not None
                             and cat.get_snapshot("vital-articles").stage == "sparse"),
                    timeout=60_000)
    # A fixed wait, for what must not happen in it: the question keeps waiting (the generator
    # is not ready yet).
    qtbot.wait(300)
    assert card.state in ("waiting", "running") and not card.tokens
    assert no_error(window)

    with qtbot.waitSignal(window.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS) as sig:
        release["generator"].set()
    answer = sig.args[1]
    assert isinstance(answer, Answer) and not answer.cancelled
    assert answer.retriever == "sparse" and answer.snapshot == "vital-articles"
    assert len(answer.docs) == window.params().n_docs
    assert abs(sum(d.prob for d in answer.docs) - 1.0) < 1e-4
    assert card.state == "done"
    # the time shown is the answer's own, the wait for the setup said apart
    assert any(re.fullmatch(r"Answered in [\d.]+ s from vital-articles, after waiting [\d.]+ s "
                            r"for the starter setup\.", line) for line in said), said
    assert "BM25 (dense index not ready yet)" in plain_text(card.meta_label.text())
    assert cat.get_snapshot("vital-articles").state == "importing"  # vectors still pending
    assert no_error(window)
    # The welcome dialog (were it still open) says questions can be asked now.
    qtbot.waitUntil(lambda: "Ready for questions" in dialog.message.text(), timeout=30_000)
    assert red_pixels(dialog.message) == 0  # good news is not written like an error

    # The vectors finish: the same snapshot is ready and dense retrieval is back.
    with qtbot.waitSignal(window.ops.events(Lane.JOBS).finished, timeout=120_000) as done:
        release["vectors"].set()
    assert done.args[0] is job  # the starter pack's setup job
    assert cat.get_snapshot("vital-articles").state == "ready"
    qtbot.waitUntil(lambda: not window.conversation.busy, timeout=10_000)
    window.question.setPlainText("Which city is the capital of France?")
    with qtbot.waitSignal(window.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS) as sig:
        window.send()
    again = sig.args[1]
    assert again.retriever == "dense" and again.snapshot == "vital-articles"
    assert "BM25" not in plain_text(window.chat.cards[-1].meta_label.text())
    assert no_error(window)


def test_a_setup_interrupted_by_quitting_resumes_at_the_next_start(
        qtbot: Any, starter_window: tuple[Any, dict[str, Any]]) -> None:
    window, release = starter_window
    data = window.backend.ctx.data.root
    op = window.library.start_starter_pack()
    cat = window.backend.catalog
    qtbot.waitUntil(lambda: (cat.find_snapshot("vital-articles") is not None
                             and cat.get_snapshot("vital-articles").stage == "sparse"),
                    timeout=60_000)
    # Quit while the dense vectors are being computed: the job is cancelled (as closing the
    # window cancels it) and the snapshot is left answering with BM25 only.
    with qtbot.waitSignal(window.ops.events(Lane.JOBS).failed, timeout=120_000) as failed:
        op.cancel()
        release["generator"].set()
        release["vectors"].set()
    assert failed.args[1].cancelled
    rec = cat.get_snapshot("vital-articles")
    assert rec.state == "failed" and rec.stage == "sparse"
    window.shutdown()
    window.backend.ctx.close()

    again = open_window(qtbot, data, StarterBackend)
    try:
        status = again.status
        # Before the job has done anything, the status bar says how answers are made.
        assert "BM25 for now" in status.snapshot.text()
        assert "keyword search (BM25) until it is done" in status.snapshot.toolTip()
        qtbot.waitUntil(lambda: "Setup resumed" in status.text.fullText(),
                        timeout=10_000)
        cat2 = again.backend.catalog
        qtbot.waitUntil(lambda: cat2.get_snapshot("vital-articles").state == "ready",
                        timeout=120_000)
        qtbot.waitUntil(lambda: "BM25" not in status.snapshot.text(), timeout=30_000)
        assert no_error(again)
    finally:
        again.shutdown()
        again.backend.ctx.close()
