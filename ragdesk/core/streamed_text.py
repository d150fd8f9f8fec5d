"""The text of an answer as it streams, in pieces that join to exactly the finished answer.

Every front end that prints tokens as they come (the server's stream, `ragdesk ask`) uses it,
so a streamed " July" and the finished "July" never disagree.
"""

from __future__ import annotations


class StreamedText:
    """The content deltas of a streamed answer, so that they join to exactly the whole
    answer's ``content`` (which is stripped): the tokens' own texts carry the tokenizer's
    word-leading space (" July"), kept in each chunk's ``ragdesk.token``. Whitespace before
    the first word is dropped, and whitespace after a word is held back until another
    word follows it (trailing whitespace is never sent)."""

    def __init__(self) -> None:
        self._started = False
        self._held = ""

    def piece(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            if not text:
                return ""
            self._started = True
        core = text.rstrip()
        if not core:
            self._held += text
            return ""
        out = self._held + core
        self._held = text[len(core):]
        return out
