"""A folder snapshot of the test documents and a running server over it (tiny models)."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.documents.conftest import make_folder


@pytest.fixture(scope="module")
def served_data(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose active snapshot "docs" is the test documents folder."""
    import torch

    torch.set_num_threads(1)
    from ragdesk.core.app import AppContext
    from ragdesk.core.documents import import_folder

    root = tmp_path_factory.mktemp("served")
    folder = make_folder(root / "docs")
    app = AppContext(root / "data")
    try:
        import_folder(app.data, app.catalog, folder, name="docs",
                      encoder=str(tiny_models.ctx_encoder))
    finally:
        app.close()
    return root / "data"


def engine_loader(data_dir: Path, tiny_models: Any) -> Any:
    from ragdesk.cli.serve_cmd import load_checked_engine

    return lambda: load_checked_engine(data_dir, None, None, str(tiny_models.question_encoder),
                                       str(tiny_models.bart))


# The per-start secret of the module's server, as `ragdesk serve` draws one.
SECRET = "ab" * 32


@pytest.fixture(scope="module")
def server(served_data: Path, tiny_models: Any) -> Iterator[Any]:
    from ragdesk.server import ServerConfig
    from ragdesk.server.run import serve_in_thread

    with serve_in_thread(ServerConfig(port=0, instance_secret=SECRET),
                         engine_loader(served_data, tiny_models)) as run:
        assert run.host.state == "ready", run.host.error
        yield run


def post(url: str, body: Any, headers: dict[str, str] | None = None,
         raw: bytes | None = None) -> tuple[int, Any]:
    """(status, JSON body) of a POST, errors included."""
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def send(url: str, method: str, path: str, headers: dict[str, str],
         body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-case headers, body) of one request with exactly ``headers`` (Host
    included: http.client adds none of its own here)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()
