"""The passage inspector: one retrieved passage in full, with the answer's words marked and
the numbers that say how much the answer owes it."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable

from PySide6.QtCore import QEvent, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.articles import Article
from ragdesk.core.types import Answer, RetrievedDoc
from ragdesk.core.units import percent, plural, prior_text
from ragdesk.ui.article_view import ArticleView
from ragdesk.ui.elided import ElidedComboBox
from ragdesk.ui.infos import CitationPlace
from ragdesk.ui.places import open_place
from ragdesk.ui.resources import icon
from ragdesk.ui.texts import elide, summarize, unbroken
from ragdesk.ui.theme import mix, passage_color, passage_tint

# Reads a cited passage's article (run in the background); None: nothing beyond the passage.
ArticleLoader = Callable[[RetrievedDoc], Callable[[], Article] | None]
PlaceSource = Callable[[Answer | None], dict[int, CitationPlace]]
_WORD = re.compile(r"\w+", re.UNICODE)
# Function words would light up every passage; they say nothing about where an answer came from.
_STOP_TEXT = """a an and are as at be by for from has have he her his i in is it its
of on or she that the their they this to was were which who with you your not but"""
STOPWORDS = frozenset(_STOP_TEXT.split())


def answer_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS}


def highlight_html(text: str, words: Iterable[str], background: QColor) -> str:
    """``text`` as HTML with every occurrence of ``words`` (case-insensitive) marked."""
    wanted = set(words)
    out: list[str] = []
    pos = 0
    for m in _WORD.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        w = m.group(0)
        if w.lower() in wanted:
            out.append(f"<span style='background-color:{background.name()};'>"
                       f"{html.escape(w)}</span>")
        else:
            out.append(html.escape(w))
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def passage_share(answer: Answer, k: int) -> tuple[int, float]:
    """(tokens whose main source is passage k, mean posterior of k over the tokens)."""
    toks = [t for t in answer.tokens if t.posterior and k < len(t.posterior)]
    if not toks:
        return 0, 0.0
    n = sum(1 for t in toks if t.source == k)
    return n, sum(t.posterior[k] for t in toks) / len(toks)


def opening_passage(answer: Answer, guess_hidden: bool = False) -> int:
    """The passage the inspector opens on: the one with the largest share of the answer
    (rank 1 may have given it nothing); an answer the snapshot does not hold opens on the
    closest passage while its guess is hidden, and on the guess's source once it is shown,
    as the card's source bar then says."""
    if answer.abstained and guess_hidden:
        return 0
    summary = summarize(answer)
    return summary.primary if summary is not None and summary.primary is not None else 0


class ShareBar(QWidget):
    """A thin bar: the passage's mean posterior over the answer, in its colour."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.value = 0.0
        self.color = QColor("#888")
        self.setFixedHeight(6)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_value(self, value: float, color: QColor) -> None:
        self.value, self.color = value, color
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(Qt.PenStyle.NoPen)
        r = QRectF(self.rect())
        p.setBrush(self.palette().color(QPalette.ColorRole.Midlight))
        p.drawRoundedRect(r, 3, 3)
        p.setBrush(self.color)
        p.drawRoundedRect(QRectF(r.x(), r.y(), r.width() * self.value, r.height()), 3, 3)
        p.end()


class PassageInspector(QWidget):
    passageChanged = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PassageInspector")
        self.answer: Answer | None = None
        self.guess_hidden = False
        self.k: int | None = None
        self.article_view: ArticleView | None = None
        self._load_article: ArticleLoader | None = None
        self._article_for: tuple[int, int] | None = None  # (id(answer), k) shown there

        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 10, 12, 10)
        lay.setSpacing(8)

        self.picker = ElidedComboBox(min_chars=12)  # a long title: "…", not a wider window
        self.picker.setAccessibleName("Passage")
        self.picker.setToolTip("Passages retrieved for the selected answer (Ctrl+1 … Ctrl+9)")
        self.picker.currentIndexChanged.connect(self._on_pick)
        lay.addWidget(self.picker)

        head = QHBoxLayout()
        self.swatch = QLabel()
        self.swatch.setFixedSize(QSize(6, 28))
        head.addWidget(self.swatch, 0, Qt.AlignmentFlag.AlignTop)
        self.title = QLabel("No passage selected")
        self.title.setObjectName("InspectorTitle")
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        tf = QFont(self.title.font())
        tf.setPointSizeF(tf.pointSizeF() * 1.25)
        tf.setWeight(QFont.Weight.DemiBold)
        self.title.setFont(tf)
        head.addWidget(self.title, 1)
        lay.addLayout(head)
        lay.addLayout(self._build_place_row())

        self._build_facts()
        lay.addLayout(self.facts)
        self.share_bar = ShareBar()
        lay.addWidget(self.share_bar)

        rule = QFrame()
        rule.setFrameShape(QFrame.Shape.HLine)
        rule.setFrameShadow(QFrame.Shadow.Plain)
        rule.setObjectName("Rule")
        lay.addWidget(rule)

        lay.addWidget(self._build_tabs(), 1)
        self._show_empty()

    def _build_tabs(self) -> QTabWidget:
        """The passage's text, and later the whole article beside it."""
        self.body = QTextBrowser()
        self.body.setObjectName("PassageText")
        self.body.setOpenExternalLinks(False)
        self.body.setFrameShape(QFrame.Shape.NoFrame)
        bf = QFont(self.body.font())
        bf.setPointSizeF(bf.pointSizeF() * 1.08)
        self.body.setFont(bf)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        # a narrow dock shortens the tabs' names with "…" rather than scrolling them away
        self.tabs.setElideMode(Qt.TextElideMode.ElideRight)
        self.tabs.setUsesScrollButtons(False)
        self.tabs.addTab(self.body, "Passage")
        self.tabs.tabBar().setVisible(False)  # until there is a whole-article view
        return self.tabs

    def add_article_view(self, view: ArticleView, load: ArticleLoader) -> None:
        """Offer the cited passage's whole article in a second tab, read with ``load`` when
        the tab is shown (reading it for every click would be wasted on the disk)."""
        self.article_view, self._load_article = view, load
        view.browser.setFont(self.body.font())  # the article reads like the passage tab
        self.tabs.addTab(view, "Whole article")
        self.tabs.setTabToolTip(1, "The passages of the cited article around this one")
        self.tabs.tabBar().setVisible(True)
        self.tabs.currentChanged.connect(lambda _i: self._refresh_article())

    def show_article(self) -> None:
        """Switch to the whole-article tab (it loads the article)."""
        if self.article_view is not None:
            self.tabs.setCurrentWidget(self.article_view)

    def _refresh_article(self) -> None:
        view, a, k = self.article_view, self.answer, self.k
        if view is None or self._load_article is None or self.tabs.currentWidget() is not view:
            return
        if a is None or k is None or not 0 <= k < len(a.docs):
            view.clear()
            self._article_for = None
            return
        if self._article_for == (id(a), k):
            return
        self._article_for = (id(a), k)
        doc = a.docs[k]
        view.show_passage(doc, self._load_article(doc), rank=k)

    def _build_place_row(self) -> QHBoxLayout:
        """"report.pdf · p. 2" and the button that opens the file there (folder snapshots)."""
        self._places: PlaceSource | None = None
        row = QHBoxLayout()
        self.place_label = QLabel()
        self.place_label.setObjectName("InspectorPlace")
        self.place_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.open_button = QPushButton(icon("folder"), "Open file at page")
        self.open_button.setObjectName("OpenCitedFile")
        self.open_button.clicked.connect(self.open_place)
        row.addWidget(self.place_label, 1)
        row.addWidget(self.open_button)
        self.place_label.setVisible(False)
        self.open_button.setVisible(False)
        return row

    def set_place_source(self, places: PlaceSource) -> None:
        """``places(answer)``: where its cited passages sit in their files, by rank."""
        self._places = places

    def places_changed(self, answer: Answer) -> None:
        if answer is self.answer and self.k is not None:
            self._show_place()

    def place(self) -> CitationPlace | None:
        if self._places is None or self.k is None:
            return None
        return self._places(self.answer).get(self.k)

    def _show_place(self) -> None:
        place = self.place()
        self.place_label.setText(place.label if place is not None else "")
        self.place_label.setVisible(place is not None)
        self.open_button.setVisible(bool(place is not None and place.uri))
        if place is not None:
            self.open_button.setText("Open file at page" if place.page is not None
                                     else "Open file")
            self.open_button.setToolTip(place.uri or "")

    def open_place(self) -> bool:
        place = self.place()
        return open_place(place) if place is not None else False

    def _build_facts(self) -> None:
        self.facts = QFormLayout()
        self.facts.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        self.facts.setHorizontalSpacing(14)
        self.facts.setVerticalSpacing(3)
        self.fact_labels: dict[str, QLabel] = {}
        for key, label in (("rank", "Rank"), ("score", "Retrieval score"),
                           ("prob", "p(z | x)"), ("share", "Words cited"),
                           ("snapshot", "Snapshot"), ("id", "Passage id")):
            value = QLabel("–")
            value.setWordWrap(True)  # only its longest word sets the dock's minimum width
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            name = QLabel(label)
            name.setObjectName("FactName")
            self.facts.addRow(name, value)
            self.fact_labels[key] = value
        self.fact_labels["score"].setToolTip("Inner product d(z)·q(x) of passage and question")
        self.fact_labels["share"].setToolTip(
            "Tokens whose most likely source is this passage, and the passage's mean "
            "posterior over all tokens of the answer")

    def _show_empty(self) -> None:
        self.title.setText("No passage selected")
        self.swatch.setStyleSheet("")
        for v in self.fact_labels.values():
            v.setText("–")
        self.share_bar.set_value(0.0, QColor("#888"))
        self._show_place()
        self.body.setHtml("<p style='color:gray'>Click a citation chip or a coloured word of "
                          "an answer to read the passage it came from.</p>")
        self._refresh_article()

    def set_answer(self, answer: Answer | None, *, guess_hidden: bool = False) -> None:
        """``guess_hidden``: the answer abstained and its card hides the guess; the passages
        show, the guess's words and shares do not, until the card shows it."""
        self.answer = answer
        self.guess_hidden = guess_hidden
        self.picker.blockSignals(True)
        self.picker.clear()
        if answer is not None:
            for k, doc in enumerate(answer.docs):
                self.picker.addItem(f"[{k + 1}] {elide(doc.title, 60)}")
        self.picker.blockSignals(False)
        self.picker.setEnabled(bool(answer and answer.docs))
        self.k = None
        if answer is not None and answer.docs:
            self.show_passage(opening_passage(answer, guess_hidden), notify=False)
        else:
            self._show_empty()

    def show_passage(self, k: int, *, notify: bool = True) -> None:
        a = self.answer
        if a is None or not 0 <= k < len(a.docs):
            return
        self.k = k
        if self.picker.currentIndex() != k:
            self.picker.blockSignals(True)
            self.picker.setCurrentIndex(k)
            self.picker.blockSignals(False)
        doc = a.docs[k]
        color = passage_color(k)
        self.swatch.setStyleSheet(f"background:{color.name()}; border-radius:3px;")
        self.title.setText(f"[{k + 1}]  {html.escape(doc.title)}")
        n, mean = passage_share(a, k)
        total = len(a.tokens)
        f = self.fact_labels
        f["rank"].setText(f"{k + 1} of {len(a.docs)}")
        f["score"].setText(f"{doc.score:.3f}")
        tau = getattr(a, "temperature", 1.0)
        f["prob"].setText(f"{prior_text(doc.prob)}  {unbroken(f'(τ = {tau:.3g})')}")
        f["prob"].setToolTip(
            f"p(z|x) = {percent(doc.prob, 1)}: softmax over the {len(a.docs)} passages of "
            "score / τ. τ = 1 for DPR; normalized encoders such as the starter pack's were "
            "trained with a temperature, measured or fitted on held-out questions (ragdesk "
            "index calibrate).")
        if self.guess_hidden:
            f["share"].setText("– (the guess is hidden: Show the guess on the card)")
            mean = 0.0
        else:
            f["share"].setText(
                f"{n} of {plural(total, 'token')} ({percent(n / total)}) · mean posterior "
                f"{percent(mean)}" if total else "no tokens")
        f["snapshot"].setText(doc.snapshot or a.snapshot or "–")
        f["id"].setText(str(doc.id))
        self.share_bar.set_value(mean, color)
        self._show_place()
        pal = self.palette()
        mark = mix(pal.color(QPalette.ColorRole.Base), passage_tint(k, pal), 1.0)
        words = () if self.guess_hidden else answer_words(a.text)
        self.body.setHtml(f"<div style='line-height:140%'>"
                          f"{highlight_html(doc.text, words, mark)}</div>")
        self._refresh_article()
        if notify:
            self.passageChanged.emit(k)

    def shown_text(self) -> str:
        return self.body.toPlainText()

    def _on_pick(self, index: int) -> None:
        if index >= 0:
            self.show_passage(index)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.k is not None:
            self.show_passage(self.k, notify=False)
