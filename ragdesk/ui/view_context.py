"""What a view or installer of the window is given instead of the window: the state it
follows, the op runner it runs work on, the backend it reaches the core through, and a way
to ask a question into the conversation. A view built from these works in any window that
offers them, and neither imports the other."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragdesk.core.types import Hit
from ragdesk.ui.backend import Backend
from ragdesk.ui.ops import OpRunner
from ragdesk.ui.state import AppState

AskFromDocs = Callable[[str, Sequence[Hit], str | None], object]


@dataclass(frozen=True)
class ViewContext:
    state: AppState  # follow ``state.answerSelected``; read the pack and snapshots here
    ops: OpRunner  # run numerical work on its lanes, never on the GUI thread
    backend: Backend  # the core, from worker threads only
    ask_from_docs: AskFromDocs  # question, passages, snapshot: answer in the conversation
