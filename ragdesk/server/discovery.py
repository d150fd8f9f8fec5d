"""Where a running ``ragdesk serve`` can be found: a small file in the data directory.

``ragdesk ask`` loads two models before it can answer (seconds to tens of seconds on a laptop,
most of it importing transformers and building the tokenizer) for an answer that takes about
one second. A server started on the same data directory already holds them, so ``ask`` asks
it instead when it is there and ready. The file says where it listens and with which models;
it is written when the server listens and removed when it stops.

A killed server leaves the file behind, and anything may listen on its port later. So the
file also holds a random secret drawn at each start (the file is readable by its owner only),
and a client sends a random challenge to ``/v1/ragdesk/whoami`` and checks the answer
(:func:`proof`) before it sends an API key or a question: only the process that wrote the
secret can answer.

Light on purpose: ``ragdesk ask`` reads it before importing anything heavy.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

FILE_NAME = "server.json"
WHOAMI_PATH = "/v1/ragdesk/whoami"
SECRET_BYTES = 32
CHALLENGE_BYTES = 32
_PROOF_CONTEXT = b"ragdesk-whoami\0"


@dataclass(frozen=True)
class ServerInfo:
    url: str  # http://127.0.0.1:PORT
    pid: int
    auth: bool  # clients must send an API key
    snapshot: str | None  # the snapshot the server was told to use (None: the active one)
    # the server was started with models of its own choosing (--question-encoder,
    # --generator): its answers may differ from what `ask` would load, so `ask` does not use it
    custom_models: bool
    secret: str | None = None  # hex; None: a file from a version that proved nothing
    # the pack whose models the server loaded (its --pack, else the pack chosen when it
    # started): `ask` uses the server only for that pack. None: models of its own, or a file
    # from a version that did not say
    pack: str | None = None


def new_secret() -> str:
    return secrets.token_hex(SECRET_BYTES)


def new_challenge() -> str:
    return secrets.token_hex(CHALLENGE_BYTES)


def proof(secret: str, challenge: str) -> str:
    """HMAC-SHA256 of the challenge under the per-start secret (both hex)."""
    return hmac.new(bytes.fromhex(secret), _PROOF_CONTEXT + challenge.encode("ascii"),
                    hashlib.sha256).hexdigest()


def is_challenge(text: str) -> bool:
    return 32 <= len(text) <= 128 and all(c in "0123456789abcdef" for c in text)


def path_in(data_root: Path) -> Path:
    return Path(data_root) / FILE_NAME


def publish(data_root: Path, info: ServerInfo) -> None:
    """Write the file atomically, readable and writable by its owner only (it holds the
    secret): created 0600, never widened by the umask or by a rename."""
    from ragdesk.core.atomic import fsync_dir, temp_name

    path = path_in(data_root)
    tmp = temp_name(path)
    data = (json.dumps(asdict(info), indent=2, sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


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
        secret = d.get("secret")
        if secret is not None:
            bytes.fromhex(secret)  # a damaged secret is no secret
        pack = d.get("pack")
        return ServerInfo(url=str(d["url"]), pid=int(d["pid"]), auth=bool(d["auth"]),
                          snapshot=d.get("snapshot"), custom_models=bool(d["custom_models"]),
                          secret=secret, pack=None if pack is None else str(pack))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
