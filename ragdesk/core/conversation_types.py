"""What the conversation store hands out, as values: a conversation's row, a stored
answer, a search hit and the marks around matched words. Kept apart from
:mod:`ragdesk.core.conversations` (which holds the catalog) so that a front end can show
them without reaching into the store."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragdesk.core.types import Answer

UNTITLED = "New conversation"

# Search snippets mark matched words with these two characters (never in user text that
# came through a text box), so a front end can escape the snippet first and then highlight.
HIT_START = "\x02"
HIT_END = "\x03"


@dataclass(frozen=True)
class ConversationRecord:
    id: int
    title: str  # what to show: the name given, else the first question, else UNTITLED
    named: bool  # whether the title was given (renamed) rather than taken from a question
    created_at: str
    updated_at: str
    answers: int
    deleted_at: str | None = None


@dataclass(frozen=True)
class StoredAnswer:
    id: int
    conversation_id: int
    position: int  # 0-based order in its conversation
    answer: Answer
    pack: str | None
    options: dict[str, object] = field(default_factory=dict)
    created_at: str = ""

    def to_json(self) -> dict[str, object]:
        d = self.answer.to_json()
        d.update(pack=self.pack, options=self.options, created=self.created_at)
        return d


@dataclass(frozen=True)
class SearchHit:
    answer_id: int
    conversation_id: int
    conversation_title: str
    question: str
    snippet: str  # matched words between HIT_START and HIT_END
    created_at: str
