"""Where a running ``ragdesk serve`` can be found: a small file in the data directory.

``ragdesk ask`` loads two models before it can answer (seconds to tens of seconds on a laptop,
most of it importing transformers and building the tokenizer) for an answer that takes about
one second. A server started on the same data directory already holds them, so ``ask`` asks
it instead when it is there and ready. The file says where it listens and with which models;
it is written when the server listens and removed when it stops (a stale one, left by a killed
server, costs one refused connection).

Light on purpose: ``ragdesk ask`` reads it before importing anything heavy.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

FILE_NAME = "server.json"


@dataclass(frozen=True)
class ServerInfo:
    url: str  # http://127.0.0.1:PORT
    pid: int
    auth: bool  # clients must send an API key
    snapshot: str | None  # the snapshot the server was told to use (None: the active one)
    # the server was started with models of its own choosing (--pack, --generator, ...): its
    # answers may differ from what `ask` would load, so `ask` does not use it
    custom_models: bool


def path_in(data_root: Path) -> Path:
    return Path(data_root) / FILE_NAME


def publish(data_root: Path, info: ServerInfo) -> None:
    from ragdesk.core.atomic import write_json_atomic

    write_json_atomic(path_in(data_root), asdict(info))


def withdraw(data_root: Path, pid: int | None = None) -> None:
    """Remove the file if it still describes this process's server."""
    p = path_in(data_root)
    try:
        if pid is not None and json.loads(p.read_text(encoding="utf-8")).get("pid") != pid:
            return  # another server took over the data directory since
        p.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def read(data_root: Path) -> ServerInfo | None:
    try:
        d = json.loads(path_in(data_root).read_text(encoding="utf-8"))
        return ServerInfo(url=str(d["url"]), pid=int(d["pid"]), auth=bool(d["auth"]),
                          snapshot=d.get("snapshot"), custom_models=bool(d["custom_models"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


