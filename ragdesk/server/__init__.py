"""``ragdesk serve``: a local HTTP API in the OpenAI chat-completions shape.

A front end like the CLI and the GUI: it builds on the core's public API (``load_engine``,
the engine's ``retrieve`` / ``ask_from_docs``, document citations) and adds nothing to it.
Importing this package is cheap (the CLI builds its parser from it); the web libraries load
with :mod:`ragdesk.server.run` / :mod:`ragdesk.server.app`.
"""

from ragdesk.server.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    MODEL_ID,
    AnswerDefaults,
    ServerConfig,
    check_bind,
    is_loopback,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MODEL_ID",
    "AnswerDefaults",
    "ServerConfig",
    "check_bind",
    "is_loopback",
]
