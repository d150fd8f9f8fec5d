"""What ``ragdesk serve`` is told, and the one rule about where it may listen."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from ragdesk.core.errors import BadInputError
from ragdesk.core.options import DEFAULT_OPTIONS

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MODEL_ID = "ragdesk"


@dataclass(frozen=True)
class AnswerDefaults:
    """Answer options a request does not set (the CLI fills them from the settings)."""

    mode: str = DEFAULT_OPTIONS.mode
    decoding: str = DEFAULT_OPTIONS.decoding
    n_docs: int = DEFAULT_OPTIONS.n_docs
    num_beams: int = DEFAULT_OPTIONS.num_beams
    max_new_tokens: int = DEFAULT_OPTIONS.max_new_tokens
    retriever: str = DEFAULT_OPTIONS.retriever


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None
    # Requests admitted at once (one answering, the rest waiting); beyond it: 429.
    queue_limit: int = 16
    max_body_bytes: int = 256 * 1024
    max_question_chars: int = 8000
    max_new_tokens_limit: int = 512
    max_docs: int = 50
    answer: AnswerDefaults = field(default_factory=AnswerDefaults)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_bind(config: ServerConfig) -> None:
    """Refuse to listen beyond this machine without an API key: the API answers from the
    user's private documents."""
    if config.api_key is not None and not config.api_key.strip():
        raise BadInputError("The API key is empty.", hint="Give a key with --api-key KEY.")
    if not is_loopback(config.host) and not config.api_key:
        raise BadInputError(
            f"Refusing to listen on {config.host}: other machines could read your snapshots "
            "without an API key.",
            hint="Pass --api-key KEY (clients send it as 'Authorization: Bearer KEY'), or "
            f"listen on {DEFAULT_HOST}.")
    if not 0 <= config.port <= 65535:
        raise BadInputError(f"--port must be between 0 and 65535, not {config.port}.")
    if config.queue_limit < 1:
        raise BadInputError(f"--queue-limit must be at least 1, not {config.queue_limit}.")
