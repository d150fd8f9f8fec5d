"""An answer's text as it streams, token by token, each token tinted by the passage it is
shown from, with the token's distribution over the passages as its tooltip."""

from __future__ import annotations

import html
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QPoint, QRectF, QSize, Qt, QUrl, Signal
from PySide6.QtGui import QColor, QFont, QHelpEvent, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QApplication, QFrame, QSizePolicy, QTextBrowser, QToolTip, QWidget

from ragdesk.core.types import AnswerToken, RetrievedDoc
from ragdesk.ui.texts import elide
from ragdesk.ui.theme import mix, passage_color, passage_tint


def _nbsp(text: str) -> str:
    # Tooltips wrap table cells to fit; a title should stay on one line.
    return html.escape(text).replace(" ", "&nbsp;")


def distribution_html(tok: AnswerToken, docs: Sequence[RetrievedDoc] | None, mode: str) -> str:
    """The tooltip of one token: its text and its full distribution over the K passages."""
    if mode == "together":
        return quoted_html(tok, docs)
    what = ("p(z | x, yᵢ, y&lt;ᵢ)" if mode == "token" else "running p(z | x, y≤ᵢ)")
    src = tok.source
    rows = []
    for k, p in sorted(enumerate(tok.posterior), key=lambda kp: -kp[1]):
        title = elide(docs[k].title, 34) if docs and k < len(docs) else f"passage {k + 1}"
        bar = "█" * max(0, round(p * 12))
        weight = "font-weight:600;" if k == src else ""
        rows.append(
            f"<tr><td style='color:{passage_color(k).name()}'>■</td>"
            f"<td nowrap style='{weight}'>[{k + 1}]&nbsp;{_nbsp(title)}</td>"
            f"<td nowrap align='right' style='{weight}'>&nbsp;{p * 100:5.1f}%&nbsp;</td>"
            f"<td nowrap style='color:{passage_color(k).name()}'>{bar}</td></tr>")
    shown = html.escape(tok.text.strip() or repr(tok.text))
    return (f"<div style='white-space:pre'><b>“{shown}”</b> &nbsp;from [{src + 1}]"
            f"<br/><span style='font-size:small'>{what}</span></div>"
            f"<table cellspacing='0' cellpadding='1'>{''.join(rows)}</table>")


def quoted_html(tok: AnswerToken, docs: Sequence[RetrievedDoc] | None) -> str:
    """The tooltip of a token read together: the passage its span is quoted from, and no
    distribution (the token carries only the retrieval prior: one prompt held them all)."""
    shown = html.escape(tok.text.strip() or repr(tok.text))
    q = tok.quoted_from
    if q is None:
        where = "held by none of the retrieved passages"
    else:
        title = elide(docs[q].title, 40) if docs and q < len(docs) else f"passage {q + 1}"
        where = (f"quoted from <span style='color:{passage_color(q).name()}'>■</span> "
                 f"[{q + 1}]&nbsp;{_nbsp(title)}")
    return (f"<div style='white-space:pre'><b>“{shown}”</b> &nbsp;{where}"
            "<br/><span style='font-size:small'>Read together: all passages in one prompt, "
            "so no share per passage</span></div>")



class TokenText(QTextBrowser):
    """Answer text built token by token; each token's background is its source's tint."""

    tokenClicked = Signal(int)  # token index

    def __init__(self, mode: str = "token", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode = mode
        self.tokens: list[AnswerToken] = []
        self.spans: list[tuple[int, int]] = []  # document positions of each token's text
        self.docs: list[RetrievedDoc] | None = None
        self.focus_passage: int | None = None
        self.setObjectName("TokenText")
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        # Tokens are reachable by mouse; the keyboard reaches passages through the chips.
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard
                                     | Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        font = QFont(self.font())
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.setFont(font)
        self.document().setDocumentMargin(2)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser#TokenText { background: transparent; }")
        self.anchorClicked.connect(self._on_anchor)
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self._fit_height()

    # ---- content --------------------------------------------------------------------------

    def append_token(self, tok: AnswerToken) -> None:
        i = len(self.tokens)
        self.tokens.append(tok)
        text = tok.text if i else tok.text.lstrip()
        body = text.lstrip()
        lead = text[: len(text) - len(body)]
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        if lead:
            cursor.insertText(lead, QTextCharFormat())
        start = cursor.position()
        cursor.insertText(body, self._format(i))
        self.spans.append((start, cursor.position()))

    def set_tokens(self, tokens: Sequence[AnswerToken]) -> None:
        self.clear()
        self.tokens, self.spans = [], []
        for tok in tokens:
            self.append_token(tok)

    def set_docs(self, docs: Sequence[RetrievedDoc]) -> None:
        self.docs = list(docs)

    def set_focus_passage(self, k: int | None) -> None:
        """Emphasise the tokens drawn from passage ``k`` (None: all equal)."""
        if k == self.focus_passage:
            return
        self.focus_passage = k
        self.restyle()

    def restyle(self) -> None:
        cursor = QTextCursor(self.document())
        for i, (start, end) in enumerate(self.spans):
            cursor.setPosition(start)
            cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            cursor.setCharFormat(self._format(i))

    def token_color(self, i: int) -> QColor:
        return self.token_format(i).background().color()

    def token_format(self, i: int) -> QTextCharFormat:
        start, end = self.spans[i]
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(min(end, start + 1), QTextCursor.MoveMode.KeepAnchor)
        return cursor.charFormat()

    def token_rect(self, i: int) -> QRectF:
        start, end = self.spans[i]
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        a = self.cursorRect(cursor)
        cursor.setPosition(max(start, end - 1))
        b = self.cursorRect(cursor)
        return QRectF(a.topLeft(), b.bottomRight()).normalized()

    def token_at(self, pos: QPoint) -> int | None:
        return self.token_at_href(self.anchorAt(pos))

    def _format(self, i: int) -> QTextCharFormat:
        tok = self.tokens[i]
        fmt = QTextCharFormat()
        fmt.setAnchor(True)
        fmt.setAnchorHref(f"tok:{i}")
        # The app palette, not ours: our background is transparent, so our Base is too.
        pal = QApplication.palette()
        fmt.setForeground(pal.color(QPalette.ColorRole.Text))
        if tok.posterior:
            k = tok.source
            tint = passage_tint(k, pal)
            if self.focus_passage is not None and k != self.focus_passage:
                tint = mix(tint, pal.color(QPalette.ColorRole.Base), 0.75)
            elif self.focus_passage is not None:
                fmt.setFontUnderline(True)
                fmt.setUnderlineColor(passage_color(k))
            fmt.setBackground(tint)
        return fmt

    # ---- interaction ---------------------------------------------------------------------

    def _on_anchor(self, url: QUrl) -> None:
        i = self.token_at_href(url.toString())
        if i is not None:
            self.tokenClicked.emit(i)

    @staticmethod
    def token_at_href(href: str) -> int | None:
        if href.startswith("tok:"):
            try:
                return int(href[4:])
            except ValueError:
                return None
        return None

    def tooltip_html(self, i: int) -> str:
        return distribution_html(self.tokens[i], self.docs, self.mode)

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            i = self.token_at(event.pos())
            if i is not None:
                QToolTip.showText(event.globalPos(), self.tooltip_html(i), self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.restyle()

    # ---- sizing: as tall as its text, never scrolling --------------------------------------

    def _fit_height(self, *_: object) -> None:
        h = int(self.document().size().height()) + self.frameWidth() * 2 + 2
        if self.height() != h:
            self.setFixedHeight(max(h, self.fontMetrics().height() + 8))

    def resizeEvent(self, event: object) -> None:
        super().resizeEvent(event)  # type: ignore[arg-type]
        self._fit_height()

    def sizeHint(self) -> QSize:
        return QSize(200, self.height())
