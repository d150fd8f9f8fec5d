"""A label, a button and a combo box that shorten their text with "…" instead of being cut
mid-letter."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QFontMetrics, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QPushButton,
    QSizePolicy,
    QStyle,
    QStyleOptionButton,
    QStyleOptionComboBox,
    QStylePainter,
    QWidget,
)


class ElidedLabel(QLabel):
    """Plain text on one line. Layouts may give it less than the whole text needs (down to
    ``min_chars`` characters); then it ends in "…" and the tooltip holds the whole text."""

    def __init__(self, text: str = "", parent: QWidget | None = None, *,
                 min_chars: int = 8,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> None:
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self._min_chars = min_chars
        self._tip = ""
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self._apply()
        self.updateGeometry()

    def fullText(self) -> str:
        return self._full

    def setToolTip(self, tip: str) -> None:
        # A tooltip of one's own wins over the elided text's.
        self._tip = tip
        self._apply()

    def is_elided(self) -> bool:
        return self.text() != self._full

    def _text_width(self, text: str) -> int:
        m = self.contentsMargins()
        return (QFontMetrics(self.font()).horizontalAdvance(text) + m.left() + m.right()
                + 2 * self.margin() + 2)

    def sizeHint(self) -> QSize:
        return QSize(self._text_width(self._full), super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        shown = self._full if len(self._full) <= self._min_chars \
            else self._full[: self._min_chars] + "…"
        return QSize(self._text_width(shown), super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._apply()

    def _apply(self) -> None:
        m = self.contentsMargins()
        room = self.width() - m.left() - m.right() - 2 * self.margin() - 2
        fm = QFontMetrics(self.font())
        shown = self._full if fm.horizontalAdvance(self._full) <= room else \
            fm.elidedText(self._full, self._mode, max(0, room))
        if shown != self.text():
            QLabel.setText(self, shown)
        QLabel.setToolTip(self, self._tip or (self._full if shown != self._full else ""))


class ElidedButton(QPushButton):
    """A push button whose text is ``prefix + body + suffix``; when the layout gives it less
    width than the whole text needs, only ``body`` is shortened with "…", so a chip keeps its
    rank and probability. The tooltip, unless set, holds the whole text."""

    def __init__(self, body: str = "", parent: QWidget | None = None, *, prefix: str = "",
                 suffix: str = "", min_body_chars: int = 6) -> None:
        super().__init__(parent)
        self._prefix, self._body, self._suffix = prefix, body, suffix
        self._min_body_chars = min_body_chars
        # Never wider than the whole text; narrower (down to the minimum hint) when the
        # layout has less room, and then the body shortens.
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self._apply()

    def set_parts(self, prefix: str, body: str, suffix: str) -> None:
        self._prefix, self._body, self._suffix = prefix, body, suffix
        self._apply()
        self.updateGeometry()

    def full_text(self) -> str:
        return self._prefix + self._body + self._suffix

    def is_elided(self) -> bool:
        return self.text() != self.full_text()

    def hint_for(self, text: str) -> QSize:
        """The size the style gives this button showing ``text`` (what QPushButton's own
        sizeHint computes for its current text, stylesheet padding included)."""
        opt = QStyleOptionButton()
        self.initStyleOption(opt)
        fm = self.fontMetrics()
        size = fm.size(Qt.TextFlag.TextShowMnemonic, text or " ")
        w, h = (size.width() if text else 0), size.height()
        if not self.icon().isNull():
            w += self.iconSize().width() + 4
            h = max(h, self.iconSize().height())
        return self.style().sizeFromContents(QStyle.ContentsType.CT_PushButton, opt,
                                             QSize(w, h), self)

    def sizeHint(self) -> QSize:
        return self.hint_for(self.full_text())

    def minimumSizeHint(self) -> QSize:
        body = self._body if len(self._body) <= self._min_body_chars \
            else self._body[: self._min_body_chars] + "…"
        return self.hint_for(self._prefix + body + self._suffix)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._apply()

    def event(self, e: QEvent) -> bool:
        # A stylesheet or font arriving later changes the padding and the text's width.
        if e.type() in (QEvent.Type.StyleChange, QEvent.Type.FontChange,
                        QEvent.Type.Polish) and hasattr(self, "_body"):
            self._apply()
        return super().event(e)

    def _apply(self) -> None:
        full = self.full_text()
        shown = full
        if self.width() < self.hint_for(full).width():
            fm = self.fontMetrics()
            room = (self.width() - self.hint_for(self._prefix + self._suffix).width())
            body = fm.elidedText(self._body, Qt.TextElideMode.ElideRight, max(0, room))
            shown = self._prefix + (body or "…") + self._suffix
        if shown != self.text():
            QPushButton.setText(self, shown)
        if not self.property("own_tooltip"):
            QPushButton.setToolTip(self, full if shown != full else "")

    def setToolTip(self, tip: str) -> None:
        self.setProperty("own_tooltip", bool(tip))
        QPushButton.setToolTip(self, tip)
        if not tip:
            self._apply()


class ElidedComboBox(QComboBox):
    """A combo box that asks for room for ``min_chars`` characters only, not for its longest
    item, and shows its current text ending in "…" when it gets less than that text needs
    (a plain one cuts it at the edge). The list it opens shows the items whole."""

    def __init__(self, parent: QWidget | None = None, *, min_chars: int = 16) -> None:
        super().__init__(parent)
        # Set before any item is added: the minimum size is worked out once, from the items.
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(min_chars)

    def shown_text(self) -> str:
        """The current text as painted at the present width."""
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        field = self.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt,
                                            QStyle.SubControl.SC_ComboBoxEditField, self)
        return self.fontMetrics().elidedText(self.currentText(), Qt.TextElideMode.ElideRight,
                                             max(0, field.width() - 2))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, opt)
        opt.currentText = self.shown_text()
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, opt)
