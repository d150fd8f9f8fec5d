"""What ``ragdesk serve`` is told, the one rule about where it may listen, and the names a
request may address it by."""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass, field
from typing import Any

from ragdesk.core.errors import BadInputError
from ragdesk.core.options import DEFAULT_OPTIONS, AnswerOptions

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MODEL_ID = "ragdesk"
# The names every local client uses; a web page that rebinds its own name to 127.0.0.1
# still sends that name, so the Host header tells the two apart.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
ANY_HOST = "*"
# p(z|x) = softmax(score / τ): below 1e-3 it is a one-hot of float noise, above 100 uniform.
TEMPERATURE_RANGE = (1e-3, 100.0)


@dataclass(frozen=True)
class AnswerDefaults:
    """Answer options a request does not set (the CLI fills them from the settings)."""

    mode: str = DEFAULT_OPTIONS.mode
    decoding: str = DEFAULT_OPTIONS.decoding
    n_docs: int = DEFAULT_OPTIONS.n_docs
    num_beams: int = DEFAULT_OPTIONS.num_beams
    max_new_tokens: int = DEFAULT_OPTIONS.max_new_tokens
    min_new_tokens: int = DEFAULT_OPTIONS.min_new_tokens
    retriever: str = DEFAULT_OPTIONS.retriever

    def options(self) -> AnswerOptions:
        """What a request that sets none of these is answered with."""
        given: dict[str, Any] = dataclasses.asdict(self)
        return dataclasses.replace(DEFAULT_OPTIONS, **given)


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None
    # Names besides LOOPBACK_NAMES and ``host`` that the Host header may carry ("*": any).
    allowed_hosts: tuple[str, ...] = ()
    # Per-start secret that /v1/ragdesk/whoami proves knowledge of (hex); None: no proof.
    instance_secret: str | None = None
    # Requests admitted at once (one answering, the rest waiting); beyond it: 429.
    queue_limit: int = 16
    max_body_bytes: int = 256 * 1024
    max_json_depth: int = 32
    max_question_chars: int = 8000
    max_new_tokens_limit: int = 512
    max_docs: int = 50
    max_beams: int = 16
    # The decoder runs n_docs × num_beams rows per step for max_tokens steps: these cap the
    # rows and the row-steps, so a request within each single limit is still bounded.
    max_rows: int = 64
    max_row_tokens: int = 16_384
    # From arrival to the last byte of the answer, queue wait included: then the answer is
    # cut off where it is (or refused if it never started).
    request_timeout_s: float = 120.0
    # The request line, headers and body must arrive within this (slow-header clients).
    header_timeout_s: float = 5.0
    keep_alive_s: int = 5
    max_connections: int = 64
    backlog: int = 128
    max_header_bytes: int = 16 * 1024
    answer: AnswerDefaults = field(default_factory=AnswerDefaults)

    def host_names(self) -> frozenset[str]:
        """The lower-case names (brackets stripped) a Host or Origin header may carry."""
        names = {*LOOPBACK_NAMES, *(normal_host(h) for h in self.allowed_hosts)}
        if not _is_wildcard(self.host):
            names.add(normal_host(self.host))
        return frozenset(names)


def normal_host(name: str) -> str:
    return name.strip().lower().removeprefix("[").removesuffix("]")


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(normal_host(host)).is_unspecified
    except ValueError:
        return False


def _is_host_name(name: str) -> bool:
    if name == ANY_HOST:
        return True
    try:
        ipaddress.ip_address(normal_host(name))
        return True
    except ValueError:
        pass
    return bool(name) and name.isascii() and all(c.isalnum() or c in "-._" for c in name)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_api_key(key: str) -> None:
    """A key a client can send: HTTP header values are bytes that clients encode as ASCII
    (or Latin-1), so any other character makes a key that never matches."""
    if not key.strip():
        raise BadInputError("The API key is empty.",
                            hint="Give a key with --api-key-file PATH or $RAGDESK_API_KEY.")
    if not all(33 <= ord(c) <= 126 for c in key):
        raise BadInputError("The API key must be printable ASCII without spaces: a client "
                            "sends it in an HTTP header, where other characters never match.",
                            hint="Use letters, digits and punctuation, e.g. the output of "
                            "`python -c \"import secrets; print(secrets.token_urlsafe())\"`.")


def check_bind(config: ServerConfig) -> None:
    """Refuse to listen beyond this machine without an API key: the API answers from the
    user's private documents."""
    if config.api_key is not None:
        check_api_key(config.api_key)
    if not is_loopback(config.host) and not config.api_key:
        raise BadInputError(
            f"Refusing to listen on {config.host}: other machines could read your snapshots "
            "without an API key.",
            hint="Pass --api-key-file PATH (or set $RAGDESK_API_KEY; clients send it as "
            f"'Authorization: Bearer KEY'), or listen on {DEFAULT_HOST}.")
    if not 0 <= config.port <= 65535:
        raise BadInputError(f"--port must be between 0 and 65535, not {config.port}.")
    if config.queue_limit < 1:
        raise BadInputError(f"--queue-limit must be at least 1, not {config.queue_limit}.")
    if ANY_HOST in config.allowed_hosts and not config.api_key:
        raise BadInputError(
            f"--allow-host {ANY_HOST!r} without an API key lets any web page you open reach "
            "the server (its own name resolved to this machine).",
            hint="Name the hosts clients use with --allow-host NAME, or give a key.")
    for name in config.allowed_hosts:
        if not _is_host_name(name):
            raise BadInputError(f"--allow-host takes a host name or address without a port "
                                f"or scheme (or {ANY_HOST!r} for any), not {name!r}.")
    if config.request_timeout_s <= 0 or config.header_timeout_s <= 0:
        raise BadInputError("The request and header timeouts must be positive.")
