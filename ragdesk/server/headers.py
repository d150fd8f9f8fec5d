"""The request headers the server's guard reads, parsed: ``Host`` and ``Origin`` (a name
and a port, one split for both) and the body's ``Content-Type``."""

from __future__ import annotations

from ragdesk.server.config import normal_host

# the port an Origin without one names, by its scheme (only these two may ask)
SCHEME_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None] | None:
    """(name, port or None where none is written) of a ``Host`` value (``name``,
    ``name:port``, ``[v6]:port``), the name lower-case and without brackets; None when it is
    not of that form."""
    value = value.strip()
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep:
            return None
    else:
        name, colon, port = value.partition(":")
        rest = ":" + port if colon else ""
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and len(rest) <= 6):
        return None
    return (normal_host(name), int(rest[1:]) if rest else None) if name else None


def origin_of(origin: str) -> tuple[str, int] | None:
    """(name, port) of an ``Origin`` value (``http(s)://host[:port]``, nothing after it),
    the port its scheme's (80, 443) where none is written; None for any other form."""
    scheme, sep, rest = origin.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEME_PORTS or any(c in rest for c in "/?#@"):
        return None
    parts = split_host(rest)
    if parts is None:
        return None
    name, port = parts
    return name, port if port is not None else SCHEME_PORTS[scheme]


def is_json_type(value: str) -> bool:
    """``application/json``, with at most a UTF-8 charset (the body is read as UTF-8)."""
    media, *params = value.split(";")
    if media.strip().lower() != "application/json":
        return False
    for param in params:
        key, _, val = param.partition("=")
        if key.strip().lower() != "charset" or val.strip().strip('"').lower() not in (
                "utf-8", "utf8"):
            return False
    return True
