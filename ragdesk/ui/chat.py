"""The conversation: one card per question, its streamed answer coloured by source passage,
a legend, citation chips and a line of facts about how the answer was made."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QPoint, QRectF, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QAction,
    QColor,
    QFont,
    QFontMetrics,
    QHelpEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.export import MODE_NAMES
from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.core.units import plural
from ragdesk.ui.backend import CitationPlace, SnapshotInfo
from ragdesk.ui.card_state import CardState
from ragdesk.ui.dialogs import set_flagged_text
from ragdesk.ui.elided import ElidedButton
from ragdesk.ui.flow_layout import FlowLayout
from ragdesk.ui.places import open_place
from ragdesk.ui.resources import icon
from ragdesk.ui.theme import mix, passage_color, passage_tint
from ragdesk.ui.verdict import VerdictRow, not_found_text

if TYPE_CHECKING:
    from ragdesk.core.confidence import SourceSummary


def elide(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


# Characters after which Unicode line breaking may wrap inside a term ("p(y|" + "x)",
# "RAG-" + "Token"); a word joiner after each keeps the term on one line.
_BREAK_AFTER = frozenset("-|/‐–—")


def unbroken(text: str) -> str:
    """``text`` that a word-wrapping label never splits: no-break spaces, and word joiners
    after the characters a line may otherwise break after."""
    return "".join(c + "\u2060" if c in _BREAK_AFTER else c
                   for c in text.replace(" ", "\u00a0"))


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


CLOSEST_PASSAGES = ("Closest passages (none of them seems to hold the answer; they are not "
                    "sources):")


def summarize(answer: Answer) -> SourceSummary | None:
    """The shares, the passage with the largest share and whether no single passage holds
    the answer: what the legend, the heat map and the inspector all show."""
    if not answer.tokens or not answer.docs:
        return None
    from ragdesk.core.confidence import summarize_sources  # numpy: not at the window's start

    return summarize_sources(answer)


EMPTY_ANSWER = (
    "The model produced an empty answer: it ended the answer before its first word. Small "
    "generators do this when the retrieved passages (below) do not contain the answer, or "
    "the question reads like something other than a question. Try rephrasing it, more "
    "passages (K), another retriever, or a snapshot that covers the topic.")


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
        href = self.anchorAt(pos)
        if href.startswith("tok:"):
            try:
                return int(href[4:])
            except ValueError:
                return None
        return None

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


class Legend(QWidget):
    """Colour swatches for passages 1..K with each one's share of the answer's tokens (by
    the source each token is shown with); the swatches wrap onto another line when the card
    is narrow rather than dropping off. An answer no single passage holds (RAG-Token pieced
    it together) says so and draws no percentages: a "100 %" would claim one passage holds
    it."""

    passageClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.k = 0
        self.counts: list[int] = []
        self.mixed = False
        self.guess = False  # the answer abstained: these are the sources of its guess
        self._entries: list[tuple[int, str, bool]] = []  # (rank, text, has tokens)
        self.setMouseTracking(True)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._rects: list[QRectF] = []
        self.setToolTip("Colour of each source passage, with its share of the answer's tokens")

    def set_counts(self, k: int, counts: Sequence[int], *, mixed: bool = False,
                   guess: bool = False) -> None:
        self.counts = list(counts)
        self.k = k
        self.mixed, self.guess = mixed, guess
        total = sum(self.counts) or 1
        share = [(self.counts[r] if r < len(self.counts) else 0) / total for r in range(k)]
        if mixed:
            self._entries = [(r, f"[{r + 1}]", True) for r in range(k) if share[r] > 0]
            self.setToolTip("No retrieved passage holds this whole answer: its words come from "
                            "these passages (" + ", ".join(
                                f"[{r + 1}] {round(100 * share[r])}%" for r in range(k)
                                if share[r] > 0) + " of its tokens)")
        else:
            self._entries = [(r, f"[{r + 1}] {round(100 * share[r])}%", share[r] > 0)
                             for r in range(k)]
            self.setToolTip("Colour of each source passage, with its share of the answer's "
                            "tokens")
        self.updateGeometry()
        self.update()

    def label(self) -> str:
        if self.mixed:
            return "The guess, from several passages:" if self.guess \
                else "From several passages:"
        return "The guess from:" if self.guess else "Sources:"

    def texts(self) -> list[str]:
        return [text for _, text, _ in self._entries]

    def _font(self) -> QFont:
        f = QFont(self.font())
        f.setPointSizeF(f.pointSizeF() * 0.92)
        return f

    def _line_h(self) -> int:
        return QFontMetrics(self._font()).height() + 6

    def layout_rects(self, width: int) -> tuple[QRectF, list[QRectF]]:
        """The label's box and each swatch-and-text box at this width."""
        fm = QFontMetrics(self._font())
        h = fm.height()
        pad = (self._line_h() - h) / 2
        label = QRectF(0, pad, fm.horizontalAdvance(self.label()) + 2, h)
        x, y = label.right() + 6, pad
        rects = []
        for text in self.texts():
            w = h * 0.8 + 4 + fm.horizontalAdvance(text) + 2
            if x + w > width and x > label.right() + 6:
                x, y = label.right() + 6, y + self._line_h()
            rects.append(QRectF(x, y, w, h))
            x += w + 12
        return label, rects

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        _, rects = self.layout_rects(width)
        lines = len({r.y() for r in rects}) or 1
        return lines * self._line_h()

    def sizeHint(self) -> QSize:
        return QSize(300, self.heightForWidth(300))

    def minimumSizeHint(self) -> QSize:
        label, rects = self.layout_rects(0)
        widest = max((r.width() for r in rects), default=0.0)
        return QSize(int(label.width() + 6 + widest), self._line_h())

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setFont(self._font())
        fm = QFontMetrics(self._font())
        h = fm.height()
        muted = self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
        label, rects = self.layout_rects(self.width())
        self._rects = rects
        p.setPen(muted)
        p.drawText(label, Qt.AlignmentFlag.AlignVCenter, self.label())
        for rect, (k, text, used) in zip(rects, self._entries, strict=True):
            sw = h * 0.8
            p.setPen(passage_color(k))
            p.setBrush(passage_tint(k, self.palette()) if used else self.palette().base())
            p.drawRoundedRect(QRectF(rect.x(), rect.y() + (h - sw) / 2, sw, sw), 3, 3)
            p.setPen(self.palette().color(QPalette.ColorRole.Text) if used else muted)
            p.drawText(QRectF(rect.x() + sw + 4, rect.y(), rect.width() - sw - 4, h),
                       Qt.AlignmentFlag.AlignVCenter, text)
        p.end()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        for r, (k, _text, _used) in zip(self._rects, self._entries, strict=False):
            if r.contains(event.position()):
                self.passageClicked.emit(k)
                return


class CitationChip(ElidedButton):
    """``[n] Title  p`` — opens the passage in the inspector. In a narrow pane the title
    shortens with "…"; the rank and the probability stay."""

    def __init__(self, k: int, doc: RetrievedDoc, parent: QWidget | None = None) -> None:
        super().__init__(elide(doc.title, 60), parent, prefix=f"[{k + 1}]  ",
                         suffix=f"   {doc.prob:.2f}")
        self.k = k
        self.doc = doc
        self.setObjectName("CitationChip")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip(
            f"<b>[{k + 1}] {html.escape(doc.title)}</b><br/>"
            f"p(z|x) = {doc.prob:.3f} &nbsp;·&nbsp; score {doc.score:.2f}"
            + (f" &nbsp;·&nbsp; {html.escape(doc.snapshot)}" if doc.snapshot else "")
            + f"<br/><br/>{html.escape(elide(doc.text, 240))}")
        c = passage_color(k).name()
        self.setStyleSheet(f"QPushButton#CitationChip {{ border-left: 4px solid {c}; }}")
        self.place: CitationPlace | None = None

    def set_place(self, place: CitationPlace) -> None:
        """Name the page or heading of a folder snapshot's passage beside its title, and
        offer to open the file there (the context menu)."""
        self.place = place
        doc = self.doc
        where = f" · {elide(place.short, 28)}" if place.short else ""
        self.set_parts(f"[{self.k + 1}]  ", elide(doc.title, 60), f"{where}   {doc.prob:.2f}")
        self.setToolTip(self.toolTip().replace(
            "<br/><br/>", f"<br/>{html.escape(place.label)}<br/><br/>", 1))
        if place.uri:
            act = QAction(f"Open {place.file_name}" + (
                f" at page {place.page}" if place.page is not None else ""), self)
            act.triggered.connect(lambda: open_place(place))
            self.addAction(act)
            self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)


class AnswerCard(QFrame):
    """One exchange: the question, the streamed answer and where it came from."""

    passageClicked = Signal(object, int)  # card, passage rank (0-based)
    tokenClicked = Signal(object, int)  # card, token index
    activated = Signal(object)  # card (clicked: becomes the selected answer)
    copyRequested = Signal(object)
    heatmapRequested = Signal(object)
    answered = Signal(object)  # Answer: finished (its chips exist)

    def __init__(self, request_id: int, question: str, params: AnswerOptions,
                 snapshot: str | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.request_id = request_id
        self.question = question
        self.params = params
        self.snapshot = snapshot
        self.answer: Answer | None = None
        self.state = CardState.WAITING
        self.selected = False
        self.setObjectName("AnswerCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # Not Maximum: that capped the card at a size hint worked out for a wider card, and a
        # narrow pane cut its wrapped text; the column's stretch keeps it from growing.
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 12, 16, 12)
        lay.setSpacing(8)

        lay.addLayout(self._header(question))

        self.status_label = QLabel()
        self.status_label.setObjectName("CardStatus")
        self.status_label.setWordWrap(True)
        lay.addWidget(self.status_label)

        self.text = TokenText(params.mode)
        self.text.tokenClicked.connect(lambda i: self.tokenClicked.emit(self, i))
        self.text.setVisible(False)  # until its first token: no blank line under the status
        lay.addWidget(self.text)

        self.legend = Legend()
        self.legend.passageClicked.connect(lambda k: self.passageClicked.emit(self, k))
        self.legend.setVisible(False)
        lay.addWidget(self.legend)

        self.verdict = VerdictRow()
        self.verdict.guessToggled.connect(self.show_guess)
        lay.addWidget(self.verdict)
        self.summary: SourceSummary | None = None

        self.chips_caption = QLabel(CLOSEST_PASSAGES)
        self.chips_caption.setObjectName("ChipsCaption")
        self.chips_caption.setWordWrap(True)
        self.chips_caption.setVisible(False)
        lay.addWidget(self.chips_caption)

        self.chips_box = QWidget()
        self.chips = FlowLayout(self.chips_box, spacing=6)
        self.chips_box.setVisible(False)
        lay.addWidget(self.chips_box)

        self.meta_label = QLabel()
        self.meta_label.setObjectName("CardMeta")
        self.meta_label.setWordWrap(True)
        lay.addWidget(self.meta_label)
        self._set_status("Waiting for the engine…")
        self._update_meta()

    def _header(self, question: str) -> QHBoxLayout:
        head = QHBoxLayout()
        head.setSpacing(6)
        self.question_label = QLabel(question)
        self.question_label.setObjectName("QuestionText")
        self.question_label.setWordWrap(True)
        self.question_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        qf = QFont(self.question_label.font())
        qf.setPointSizeF(qf.pointSizeF() * 1.2)
        qf.setWeight(QFont.Weight.DemiBold)
        self.question_label.setFont(qf)
        head.addWidget(self.question_label, 1)
        self.copy_button = self._tool_button("copy", "Copy this answer as Markdown")
        self.copy_button.clicked.connect(lambda: self.copyRequested.emit(self))
        self.heat_button = self._tool_button("heatmap", "Show the posterior heat map")
        self.heat_button.clicked.connect(lambda: self.heatmapRequested.emit(self))
        head.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.heat_button, 0, Qt.AlignmentFlag.AlignTop)
        return head

    def _tool_button(self, icon_name: str, tip: str) -> QToolButton:
        b = QToolButton()
        b.setObjectName("CardButton")
        b.setIcon(icon(icon_name))
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.setEnabled(False)
        return b

    def refresh_icons(self) -> None:
        self.copy_button.setIcon(icon("copy"))
        self.heat_button.setIcon(icon("heatmap"))

    # ---- streaming ------------------------------------------------------------------------

    def set_running(self) -> None:
        self.state = CardState.RUNNING
        self._set_status("Retrieving passages and generating…")

    def set_queued(self, text: str) -> None:
        """Waiting for something else first (the starter pack's setup): say what and how far."""
        self._set_status(text)

    def append_token(self, tok: AnswerToken) -> None:
        if self.state is not CardState.RUNNING:
            self.set_running()
        if not self.text.tokens:
            self.status_label.setVisible(False)
            self.text.setVisible(True)
            self.heat_button.setEnabled(True)
        self.text.append_token(tok)
        self._update_legend()

    @property
    def tokens(self) -> list[AnswerToken]:
        return self.text.tokens

    def finish(self, answer: Answer) -> None:
        self.answer = answer
        self.state = CardState.CANCELLED if answer.cancelled else CardState.DONE
        self.text.mode = answer.mode
        # The final answer is authoritative: RAG-Sequence's thorough decoding re-scores
        # hypotheses at the end, so streamed tokens may differ from the chosen ones, and each
        # token's shown source (a passage that holds it) is settled only now.
        if [(t.id, t.source) for t in self.text.tokens] != [
                (t.id, t.source) for t in answer.tokens] or any(
                a.posterior != b.posterior for a, b in zip(self.text.tokens, answer.tokens,
                                                           strict=False)):
            self.text.set_tokens(answer.tokens)
        self.text.set_docs(answer.docs)
        self.summary = summarize(answer)
        self._update_legend()
        self._build_chips(answer.docs)
        abstained = answer.abstained and not answer.cancelled
        self.verdict.set_answer(answer)
        self.chips_caption.setVisible(abstained and bool(answer.docs))
        if abstained:
            # Not found: said plainly in the text's place; the guess is one click away.
            self._set_status(not_found_text(answer.snapshot), not_found=True)
        elif not answer.tokens:
            self._set_status(EMPTY_ANSWER)
        elif answer.cancelled:
            self._set_status("Stopped.")
        else:
            self.status_label.setVisible(False)
        self.show_guess(not abstained)
        self.copy_button.setEnabled(True)
        self.heat_button.setEnabled(bool(answer.tokens))
        self._update_meta()
        self.answered.emit(answer)

    def fail(self, message: str, cancelled: bool = False) -> None:
        self.state = CardState.CANCELLED if cancelled else CardState.FAILED
        text = "Stopped before the answer was finished." if cancelled else message
        self._set_status(text, error=not cancelled)
        self.copy_button.setEnabled(False)
        self._update_meta()

    def show_guess(self, shown: bool) -> None:
        """Show the answer's text and where it came from (for an abstained answer, its best
        guess), or only the verdict."""
        has_text = bool(self.text.tokens)
        self.text.setVisible(shown and has_text)
        self.legend.setVisible(shown and has_text and self.legend.k > 0)
        if self.verdict.guess_button.isChecked() != shown and self.verdict.isVisible() \
                and self.verdict.guess_button.isVisible():
            self.verdict.guess_button.setChecked(shown)

    def _set_status(self, text: str, error: bool = False, not_found: bool = False) -> None:
        set_flagged_text(self.status_label, text, error=error, notfound=not_found)
        self.status_label.setVisible(True)

    def _update_legend(self) -> None:
        toks = self.text.tokens
        if not toks or not toks[0].posterior:
            return
        k = len(toks[0].posterior)
        counts = [0] * k
        for t in toks:
            if 0 <= t.source < k:
                counts[t.source] += 1
        a, summary = self.answer, self.summary
        self.legend.set_counts(k, counts, mixed=bool(summary and summary.mixed),
                               guess=bool(a is not None and a.abstained and not a.cancelled))
        if self.answer is None:  # streaming; finish() decides what a finished card shows
            self.legend.setVisible(True)

    def _build_chips(self, docs: Sequence[RetrievedDoc]) -> None:
        while self.chips.count():
            item = self.chips.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.deleteLater()
        for k, doc in enumerate(docs):
            chip = CitationChip(k, doc)
            chip.clicked.connect(lambda _=False, k=k: self.passageClicked.emit(self, k))
            self.chips.addWidget(chip)
        self.chips_box.setVisible(bool(docs))

    def chip(self, k: int) -> CitationChip:
        item = self.chips.itemAt(k)
        w = item.widget() if item is not None else None
        assert isinstance(w, CitationChip)
        return w

    def set_places(self, places: dict[int, CitationPlace]) -> None:
        """Where the cited passages sit in their files, by rank (folder snapshots only)."""
        for k, chip in enumerate(self.chip_widgets()):
            if k in places:
                chip.set_place(places[k])

    def chip_widgets(self) -> list[CitationChip]:
        out = []
        for i in range(self.chips.count()):
            item = self.chips.itemAt(i)
            w = item.widget() if item is not None else None
            if isinstance(w, CitationChip):
                out.append(w)
        return out

    def _update_meta(self) -> None:
        p = self.params
        # How the answer was read, once it says so; until then what was asked for.
        mode = self.answer.mode if self.answer is not None else p.mode
        parts = [MODE_NAMES.get(mode, mode)]
        if mode == "sequence":
            parts.append(f"{p.decoding} decoding")
        a = self.answer
        if a is not None and a.docs and len(a.docs) < p.n_docs:
            # A snapshot smaller than K answers with all it holds (the core's rule).
            parts.append(f"K = {len(a.docs)}: all the snapshot holds ({p.n_docs} asked)")
        else:
            parts.append(f"K = {p.n_docs}")
        # What really retrieved (a snapshot still computing its vectors answers with BM25).
        used = a.retriever if a is not None and a.retriever else p.retriever
        if used != "dense":
            label = "BM25" if used == "sparse" else used
            if used != p.retriever:
                label += " (dense index not ready yet)"
            parts.append(label)
        if p.num_beams > 1:
            parts.append(f"{p.num_beams} beams")
        snap = (a.snapshot if a is not None and a.snapshot else self.snapshot)
        if snap:
            parts.append(f"snapshot {snap}")
        if a is not None:
            parts.append(plural(len(a.tokens), "token"))
            total = a.timings.get("total_s")
            if total:
                parts.append(f"{total:.2f} s")
            parts.append(f"log p(y|x) = {a.logprob:.2f}")
        # Wrap between the facts, never inside one ("log p(y|" / "x)").
        self.meta_label.setText("  ·  ".join(unbroken(x) for x in parts))

    # ---- selection ------------------------------------------------------------------------

    def set_selected(self, selected: bool) -> None:
        self.selected = selected
        self.setProperty("selected", selected)
        self.style().unpolish(self)
        self.style().polish(self)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.activated.emit(self)
        super().mousePressEvent(event)


class EmptyState(QWidget):
    """What an empty conversation shows: what to do, and a few questions to try."""

    exampleChosen = Signal(str)

    EXAMPLES = (
        "Who painted the Mona Lisa?",
        "What causes the seasons on Earth?",
        "When did the Roman Empire fall?",
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(24, 48, 24, 24)
        lay.setSpacing(10)
        lay.addStretch(1)
        title = QLabel("Ask a question")
        title.setObjectName("EmptyTitle")
        tf = QFont(title.font())
        tf.setPointSizeF(tf.pointSizeF() * 1.6)
        tf.setWeight(QFont.Weight.DemiBold)
        title.setFont(tf)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(title)
        self.hint = QLabel()
        self.hint.setObjectName("EmptyHint")
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(self.hint)
        # The suggestions wrap onto more lines when the pane is narrow (a docked panel
        # widened), instead of widening the page past the pane's edge.
        self.buttons_box = QWidget()
        row = FlowLayout(self.buttons_box, spacing=8, centred=True)
        self.buttons: list[ElidedButton] = []
        for q in self.EXAMPLES:
            b = ElidedButton(q)
            b.setObjectName("ExampleButton")
            b.setCursor(Qt.CursorShape.PointingHandCursor)
            b.clicked.connect(lambda _=False, q=q: self.exampleChosen.emit(q))
            row.addWidget(b)
            self.buttons.append(b)
        lay.addWidget(self.buttons_box)
        lay.addStretch(2)
        self.set_snapshot(None)

    def set_snapshot(self, info: SnapshotInfo | None) -> None:
        """Name the snapshot questions go to; Wikipedia questions are suggested only where
        they can be answered (not over a folder of the user's own documents)."""
        where = (f"the snapshot “{html.escape(info.name)}”" if info is not None
                 else "the active snapshot")
        own = info is not None and info.documents
        first = (f"ragdesk finds passages in the documents of {where} and writes an answer "
                 "from them." if own else
                 f"ragdesk finds passages in {where} and writes an answer from them.")
        self.hint.setText(f"{first}<br/>Every word is coloured by the passage it came from; "
                          "hover it for the full distribution.")
        self.buttons_box.setVisible(not own)


class ChatView(QScrollArea):
    """A scrolling column of AnswerCards that follows the newest text while it streams."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatView")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.container = QWidget()
        self.container.setObjectName("ChatContainer")
        self.column = QVBoxLayout(self.container)
        self.column.setContentsMargins(20, 16, 20, 16)
        self.column.setSpacing(14)
        self.empty = EmptyState()
        self.column.addWidget(self.empty)
        self.column.addStretch(1)
        self.setWidget(self.container)
        self.cards: list[AnswerCard] = []
        self._stick = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    def add_card(self, card: AnswerCard) -> AnswerCard:
        self.empty.setVisible(False)
        self.column.insertWidget(self.column.count() - 1, card)
        self.cards.append(card)
        self._stick = True
        QTimer.singleShot(0, self.scroll_to_bottom)
        return card

    def card(self, request_id: int) -> AnswerCard | None:
        for c in self.cards:
            if c.request_id == request_id:
                return c
        return None

    def clear(self) -> None:
        for c in self.cards:
            self.column.removeWidget(c)
            c.deleteLater()
        self.cards = []
        self.empty.setVisible(True)

    def scroll_to_bottom(self) -> None:
        self.verticalScrollBar().setValue(self._follow(self.verticalScrollBar().maximum()))

    def _follow(self, hi: int) -> int:
        """Where following the newest text stops: the bottom, unless the newest card is
        taller than the pane; then its top (the question and the answer) stays in view and
        the chips below are a scroll away."""
        card = self.cards[-1] if self.cards else None
        if card is None or card.y() <= 0:  # not laid out yet: the next range change is
            return hi
        return max(0, min(hi, card.y() - self.column.spacing()))

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= self._follow(bar.maximum()) - 8

    def _on_range(self, _lo: int, hi: int) -> None:
        # Follow streaming text down; the empty state is read from its top.
        if self._stick and self.cards:
            self.verticalScrollBar().setValue(self._follow(hi))
