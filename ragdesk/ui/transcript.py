"""Copying answers and exporting the conversation as Markdown."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QFileDialog, QLineEdit, QPlainTextEdit, QTextEdit

from ragdesk.core.errors import RagdeskError
from ragdesk.core.export import answer_markdown, conversation_markdown
from ragdesk.core.types import Answer
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.chat.view import ChatView
from ragdesk.ui.ops import Lane, Op, OpContext, OpRunner
from ragdesk.ui.selection import AnswerSelection


class Transcript:
    def __init__(self, chat: ChatView, selection: AnswerSelection,
                 show: Callable[[str], None], ops: OpRunner) -> None:
        self.chat = chat
        self.selection = selection
        self.show = show
        self.ops = ops  # a failed export is the runner's error dialog

    def answers(self) -> list[Answer]:
        return [c.answer for c in self.chat.cards if c.answer is not None]

    def copy_text(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self.show("Copied.")

    def copy(self) -> None:
        """The focused text's selection if it has one, else the selected answer."""
        w = QApplication.focusWidget()
        if isinstance(w, (QTextEdit, QPlainTextEdit)) and w.textCursor().hasSelection():
            w.copy()
            return
        if isinstance(w, QLineEdit) and w.hasSelectedText():
            w.copy()
            return
        self.copy_answer()

    def copy_answer(self) -> None:
        if self.selection.answer is not None:
            self.copy_text(answer_markdown(self.selection.answer))

    def copy_card(self, card: AnswerCard) -> None:
        if card.answer is not None:
            self.copy_text(answer_markdown(card.answer))

    def copy_conversation(self) -> None:
        if self.answers():
            self.copy_text(conversation_markdown(self.answers()))

    def export_markdown(self, path: str | Path) -> Path:
        """Write the conversation to ``path`` now (the caller's thread)."""
        p = Path(path)
        p.write_text(conversation_markdown(self.answers()), encoding="utf-8")
        self.show(f"Exported the conversation to {p}.")
        return p

    def export_dialog(self) -> None:
        """Ask for a file, then write it on the writes lane."""
        if not self.answers():
            self.show("Nothing to export yet.")
            return
        first = self.answers()[0].question
        stem = re.sub(r"[^A-Za-z0-9]+", "-", first).strip("-").lower()[:40] or "conversation"
        path, _ = QFileDialog.getSaveFileName(self.chat.window(), "Export conversation",
                                              str(Path.home() / f"{stem}.md"),
                                              "Markdown (*.md);;All files (*)")
        if not path:
            return
        text = conversation_markdown(self.answers())

        def write(_ctx: OpContext) -> None:
            try:
                Path(path).write_text(text, encoding="utf-8")
            except OSError as exc:
                raise RagdeskError(f"Could not write {path}: {exc.strerror or exc}.",
                                   gui_hint="Choose another folder.") from exc

        Op(write, lane=Lane.WRITES, title="Export the conversation").success(
            lambda _r: self.show(f"Exported the conversation to {path}.")).run(self.ops)
