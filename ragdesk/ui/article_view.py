"""The whole-article view of the inspector: the passages of the cited passage's article, the
cited one highlighted and scrolled to, and a link to the article when its source is known.

It shows the passage as the answer stored it at once, then asks the injected
:class:`Background` for the whole article (the caller's ``load`` reads the snapshot, e.g.
``lambda: backend.article(doc)``). When that fails (the snapshot
was removed) the stored passage stays, with a note saying why the rest is missing.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QColor, QDesktopServices, QPalette
from PySide6.QtWidgets import QLabel, QTextBrowser, QVBoxLayout, QWidget

from ragdesk.core.articles import Article, stored_article
from ragdesk.core.types import RetrievedDoc
from ragdesk.ui.background import Background
from ragdesk.ui.theme import mix, passage_tint

CITED_ANCHOR = "cited"


class ArticleView(QWidget):
    """Signals: ``link_clicked(url)`` when the article's link is followed (it is also opened
    with the desktop's browser or file viewer unless ``open_links`` is False); ``loaded()``
    when the whole article is shown; ``load_failed(message)`` when only the stored passage
    can be."""

    link_clicked = Signal(str)
    loaded = Signal()
    load_failed = Signal(str)

    def __init__(self, background: Background, *, open_links: bool = True,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ArticleView")
        self._background = background
        self._open_links = open_links
        self._article: Article | None = None
        self._rank: int | None = None
        self._gen = 0
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)  # it quotes names and messages
        self.note.hide()
        lay.addWidget(self.note)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.setAccessibleName("Article")
        self.browser.document().setDocumentMargin(10)
        self.browser.anchorClicked.connect(self._on_anchor)
        lay.addWidget(self.browser, 1)

    # ---- what is shown ---------------------------------------------------------------

    def article(self) -> Article | None:
        return self._article

    def clear(self) -> None:
        self._gen += 1
        self._article = None
        self.note.hide()
        self.browser.clear()

    def show_passage(self, doc: RetrievedDoc, load: Callable[[], Article] | None = None, *,
                     rank: int | None = None) -> None:
        """Show ``doc`` as stored, then its whole article from ``load`` (run in the
        background). ``rank``: the passage's rank in its answer, for its colour."""
        self._gen += 1
        gen = self._gen
        self._rank = rank
        self._render(stored_article(doc))
        if load is None:
            self._set_note("Only the cited passage is stored with this answer.")
            return
        self._set_note("Loading the whole article…")

        def done(article: Article) -> None:
            if gen == self._gen:
                self.show_article(article, rank=rank)

        def failed(message: str) -> None:
            if gen != self._gen:
                return
            where = f" from the snapshot “{doc.snapshot}”" if doc.snapshot else ""
            self._set_note(f"The rest of the article cannot be read{where}: {message} "
                           "The passage below is the one stored with the answer.")
            self.load_failed.emit(message)

        self._background(load, done, on_error=failed)

    def show_article(self, article: Article, *, rank: int | None = None) -> None:
        self._rank = rank if rank is not None else self._rank
        self._render(article)
        if article.stored_only:
            self._set_note("Only the cited passage is stored with this answer.")
        else:
            self.note.hide()
            self.loaded.emit()

    def _set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.show()

    # ---- rendering -------------------------------------------------------------------

    def cited_color(self) -> QColor:
        pal = self.palette()
        if self._rank is not None:
            return passage_tint(self._rank, pal)
        return mix(pal.color(QPalette.ColorRole.Base),
                   pal.color(QPalette.ColorRole.Highlight), 0.35)

    def _render(self, article: Article) -> None:
        self._article = article
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
        parts = [f"<h3>{html.escape(article.title or '(untitled)')}</h3>"]
        meta = []
        if article.link:
            what = "file" if article.link.startswith("file:") else "article"
            meta.append(f'<a href="{html.escape(article.link, quote=True)}">'
                        f"Open the {what}</a>")
        if article.source_id and not article.source_id.startswith("{") and \
                article.source_id not in (article.title, article.link):
            meta.append(f"source id {html.escape(article.source_id)}")
        if not article.stored_only:
            n = len(article.passages)
            meta.append(f"{n} passage{'s' if n != 1 else ''} shown")
        if meta:
            parts.append(f'<p style="color:{muted}">{" · ".join(meta)}</p>')
        if article.more_before:
            parts.append(f'<p style="color:{muted}"><i>… the article begins earlier.</i></p>')
        color = self.cited_color().name()
        # One running text: passages are 100-word cuts that ignore sentences, so a paragraph
        # per passage would break the article mid-sentence.
        flow = []
        for p in article.passages:
            text = html.escape(p.text)
            if p.id == article.cited_id:
                flow.append(f'<a name="{CITED_ANCHOR}"></a>'
                            f'<span style="background-color:{color}">{text}</span>')
            else:
                flow.append(text)
        parts.append(f"<p>{' '.join(flow)}</p>")
        if article.more_after:
            parts.append(f'<p style="color:{muted}"><i>… the article goes on.</i></p>')
        self.browser.setHtml("".join(parts))
        # After the layout has run, or there is nothing to scroll yet.
        QTimer.singleShot(0, self, self._scroll_to_cited)

    def _scroll_to_cited(self) -> None:
        self.browser.scrollToAnchor(CITED_ANCHOR)

    def _on_anchor(self, url: QUrl) -> None:
        self.link_clicked.emit(url.toString())
        if self._open_links:
            QDesktopServices.openUrl(url)
