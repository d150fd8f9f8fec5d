"""The whole-article view over a snapshot built by the real importer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextDocument

from ragdesk.core.articles import Article, ArticlePassage
from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import NotFoundError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import SnapshotIndex, import_snapshot, open_snapshot
from ragdesk.core.snapshots.articles import article_around
from ragdesk.core.types import RetrievedDoc
from ragdesk.ui.article_view import ArticleView
from ragdesk.ui.background import op_background
from ragdesk.ui.ops import OpRunner
from ragdesk.ui.theme import passage_tint

TIMEOUT_MS = 10_000


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory, tiny_models: Any
             ) -> Iterator[SnapshotIndex]:
    from ragdesk.core.encoders import load_encoder

    root = tmp_path_factory.mktemp("article-view")
    data = DataDir(root / "data").ensure()
    catalog = Catalog(data.catalog_path)
    src = root / "s.jsonl"
    rows = [{"id": "https://example.org/before", "title": "Before", "text": words("b", 40)},
            {"id": "https://example.org/long", "title": "Long", "text": words("w", 2400)},
            {"id": "https://example.org/after", "title": "After", "text": words("a", 40)}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    import_snapshot(data, catalog, src, name="Articles",
                    encoder=load_encoder(tiny_models.ctx_encoder, role="passage"))
    index = open_snapshot(data, catalog, "Articles")
    yield index
    index.close()


@pytest.fixture()
def runner(qapp: Any) -> Iterator[OpRunner]:
    r = OpRunner()
    yield r
    assert r.shutdown(5_000)
    r.deleteLater()


def make_view(qtbot: Any, runner: OpRunner) -> ArticleView:
    view = ArticleView(op_background(runner), open_links=False)
    qtbot.addWidget(view)
    view.resize(420, 360)
    view.show()
    return view


def doc_of(index: SnapshotIndex, pid: int, snapshot: str | None = "Articles") -> RetrievedDoc:
    p = index.get_passages([pid])[0]
    return RetrievedDoc(p.id, p.title, p.text, 70.0, 0.5, snapshot)


def background_of(doc: QTextDocument, text: str) -> str:
    cursor = doc.find(text)
    assert not cursor.isNull(), text[:40]
    return cursor.charFormat().background().color().name()


def test_shows_the_neighbouring_passages_of_the_cited_article(
        qtbot: Any, runner: OpRunner, snapshot: SnapshotIndex) -> None:
    view = make_view(qtbot, runner)
    cited = 21  # passage 21 of the snapshot: the 21st of "Long" (ids 1..24)
    loaded_on: list[bool] = []

    def load() -> Article:
        loaded_on.append(threading.current_thread() is threading.main_thread())
        return article_around(snapshot, cited)

    with qtbot.waitSignal(view.loaded, timeout=TIMEOUT_MS):
        view.show_passage(doc_of(snapshot, cited), load, rank=2)
    assert loaded_on == [False]  # the snapshot was read off the GUI thread
    article = view.article()
    assert article is not None and article.title == "Long"
    # Independently: the article's passages are its 100-word blocks, in order.
    blocks = [" ".join(f"w{i}" for i in range(s, min(s + 100, 2400)))
              for s in range(0, 2400, 100)]
    assert [p.text for p in article.passages] == blocks  # all 24: within 30 on each side
    assert not article.more_before and not article.more_after
    plain = view.browser.toPlainText()
    assert "Before" not in plain and "b0" not in plain and "a0" not in plain
    assert plain.index("w0 w1") < plain.index("w2000 w2001") < plain.index("w2300 w2301")
    # The cited block, and only it, has the passage's colour.
    doc = view.browser.document()
    tint = passage_tint(2, view.palette()).name()
    assert background_of(doc, blocks[20][:30]) == tint
    assert background_of(doc, blocks[19][:30]) != tint
    assert background_of(doc, blocks[21][:30]) != tint
    # Scrolled to the cited passage, far down a 24-passage article.
    qtbot.waitUntil(lambda: view.browser.verticalScrollBar().value() > 0, timeout=TIMEOUT_MS)
    assert "Open the article" in view.browser.toHtml()
    assert not view.note.isVisible()


def test_the_link_is_reported_when_followed(qtbot: Any, runner: OpRunner,
                                            snapshot: SnapshotIndex) -> None:
    view = make_view(qtbot, runner)
    view.show_article(article_around(snapshot, 0))
    article = view.article()
    assert article is not None and article.link == "https://example.org/before"
    with qtbot.waitSignal(view.link_clicked, timeout=TIMEOUT_MS) as sig:
        view.browser.anchorClicked.emit(QUrl("https://example.org/before"))
    assert sig.args == ["https://example.org/before"]


def test_a_removed_snapshot_leaves_the_stored_passage(qtbot: Any, runner: OpRunner) -> None:
    view = make_view(qtbot, runner)
    doc = RetrievedDoc(7, "Radium", "Radium is a chemical element.", 70.0, 0.9, "Old wiki")

    def load() -> Article:
        raise NotFoundError("There is no snapshot 'Old wiki'.")

    with qtbot.waitSignal(view.load_failed, timeout=TIMEOUT_MS):
        view.show_passage(doc, load)
    assert "Radium is a chemical element." in view.browser.toPlainText()
    assert view.note.isVisible() and "Old wiki" in view.note.text()
    article = view.article()
    assert article is not None and article.stored_only


def test_a_late_article_does_not_replace_a_newer_choice(
        qtbot: Any, runner: OpRunner, snapshot: SnapshotIndex) -> None:
    view = make_view(qtbot, runner)
    gate = threading.Event()

    def slow() -> Article:
        gate.wait(5)
        return article_around(snapshot, 0)

    view.show_passage(doc_of(snapshot, 0), slow)
    with qtbot.waitSignal(view.loaded, timeout=TIMEOUT_MS):
        view.show_passage(doc_of(snapshot, 25), lambda: article_around(snapshot, 25))
    gate.set()
    qtbot.waitUntil(lambda: not runner.busy(), timeout=TIMEOUT_MS)  # the late one delivered
    article = view.article()
    assert article is not None and article.title == "After"


def test_stored_only_article_renders_without_loading(qtbot: Any, runner: OpRunner) -> None:
    view = make_view(qtbot, runner)
    art = Article("T", (ArticlePassage(1, "x <b>y</b>"),), 1, False, False, None, None, True)
    view.show_article(art)
    assert "x <b>y</b>" in view.browser.toPlainText()  # text, not markup
    assert view.note.isVisible()
