"""Fixtures of the GUI tests: a data directory with two small snapshots built by the real
importer with the tiny DPR encoder, a custom "tiny" model pack (tiny DPR + tiny BART), and a
main window over a fresh copy of it."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.options import AnswerOptions
from ragdesk.core.progress import CancelToken
from ragdesk.core.types import Answer
from ragdesk.ui.backend import Backend, OnToken
from ragdesk.ui.ops import Lane

ARTICLE_WORDS = 150  # two passages per article keeps imports quick
A_ARTICLES = slice(0, 40)
B_ARTICLES = slice(40, 80)


def article_rows(tiny_models: Any, which: slice) -> list[tuple[str, str]]:
    return [(t, " ".join(x.split()[:ARTICLE_WORDS])) for t, x in tiny_models.corpus[which]]


def write_jsonl(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in rows),
                    encoding="utf-8")
    return path


def expected_passages(rows: list[tuple[str, str]], words: int = 100) -> int:
    """Non-overlapping 100-word chunks, counted with a plain loop."""
    n = 0
    for _, text in rows:
        count = len(text.split())
        while count > 0:
            n += 1
            count -= words
    return n


@pytest.fixture(scope="session")
def ui_template(tmp_path_factory: pytest.TempPathFactory, tiny_models: Any) -> Path:
    from ragdesk.core import models
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot

    root = tmp_path_factory.mktemp("ui-template") / "data"
    ctx = AppContext(root)
    ctx.data.ensure()
    src = root.parent
    for name, which in (("wiki-a", A_ARTICLES), ("wiki-b", B_ARTICLES)):
        path = write_jsonl(src / f"{name}.jsonl", article_rows(tiny_models, which))
        import_snapshot(ctx.data, ctx.catalog, path, name=name,
                        encoder=str(tiny_models.ctx_encoder))
    # A snapshot in another vector space (sentence-transformers, 24-d): the tiny pack
    # cannot query it, so the GUI must show it disabled with the reason.
    path = write_jsonl(src / "other-space.jsonl", article_rows(tiny_models, slice(80, 84)))
    import_snapshot(ctx.data, ctx.catalog, path, name="other-space",
                    encoder=str(tiny_models.st_encoder))
    models.register_pack(ctx.catalog, models.PackSpec(
        name="tiny", kind="custom", question_encoder=str(tiny_models.question_encoder),
        passage_encoder=str(tiny_models.ctx_encoder), generator=str(tiny_models.bart),
        generator_kind="seq2seq", description="tiny random DPR + BART",
        encoder_family="dpr", encoder_dim=32))
    ctx.catalog.set_active("wiki-a")
    ctx.settings.update({"model_pack": "tiny", "theme": "light", "mode": "token",
                         "n_docs": 3, "num_beams": 1, "max_new_tokens": 8})
    ctx.close()
    return root


@pytest.fixture()
def ui_data(ui_template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "data"
    shutil.copytree(ui_template, dest)
    return dest


@pytest.fixture(scope="session")
def tiny_parts(tiny_models: Any) -> tuple[Any, Any]:
    """The tiny question encoder and generator, loaded once for the whole session."""
    from ragdesk.core.models import load_generator, load_question_encoder

    return (load_question_encoder(str(tiny_models.question_encoder)),
            load_generator(str(tiny_models.bart)))


class SharedModelsBackend(Backend):
    """The real Backend, except that the engine reuses models loaded once per session
    (loading is covered by the tests that use the plain Backend). ``gate``: when set up,
    the worker pauses after the first streamed token until the test opens it."""

    parts: tuple[Any, Any] | None = None

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.gate: threading.Event | None = None
        self.answers_started: list[str | None] = []

    def engine(self, pack: str) -> Any:
        if self.parts is None:
            return super().engine(pack)
        library = self.library()
        with self._engine_lock:
            if self._engine is None or self._engine_pack != pack:
                from ragdesk.core.engine import Engine

                self._engine = Engine(*self.parts, library=library)
                self._engine_pack = pack
            return self._engine

    def answer(self, question: str, params: AnswerOptions, *, pack: str, snapshot: str | None,
               on_token: OnToken | None, cancel: CancelToken) -> Answer:
        self.answers_started.append(snapshot)
        gate = self.gate
        first = [True]

        def gated(tok: Any) -> None:
            if on_token is not None:
                on_token(tok)
            if gate is not None and first[0]:
                first[0] = False
                gate.wait(60)

        return super().answer(question, params, pack=pack, snapshot=snapshot,
                              on_token=gated, cancel=cancel)


def open_window(qtbot: Any, data: Path, backend_cls: type[Backend]) -> Any:
    from ragdesk.core.app import AppContext
    from ragdesk.ui.main_window import MainWindow

    ctx = AppContext(data)
    backend = backend_cls(ctx)
    window = MainWindow(backend, offer_first_run=False)
    qtbot.addWidget(window)
    window.resize(1200, 800)
    window.show()
    qtbot.waitExposed(window)
    with qtbot.waitSignal(window.state.snapshotsChanged, timeout=30_000):
        window.start()
    return window


@pytest.fixture()
def window(qtbot: Any, ui_data: Path, tiny_parts: tuple[Any, Any]) -> Iterator[Any]:
    SharedModelsBackend.parts = tiny_parts
    w = open_window(qtbot, ui_data, SharedModelsBackend)
    # The models' preload ends with a made-up answer (the engine's warm-up): tests start
    # once it is done, so that its judging and its status lines are not theirs.
    qtbot.waitUntil(lambda: not w.ops.busy(Lane.ENGINE), timeout=120_000)
    yield w
    if w.backend.gate is not None:
        w.backend.gate.set()
    w.shutdown()
    w.backend.ctx.close()


@pytest.fixture()
def fresh_window(qtbot: Any, ui_data: Path) -> Iterator[Any]:
    """A window whose backend loads the models itself, as the app does."""
    w = open_window(qtbot, ui_data, Backend)
    yield w
    w.shutdown()
    w.backend.ctx.close()
