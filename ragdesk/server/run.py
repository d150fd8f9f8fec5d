"""Running the server: in the foreground for ``ragdesk serve``, or in a thread on a free
port (tests and the load benchmark)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragdesk.server.app import create_app
from ragdesk.server.config import ServerConfig, check_bind
from ragdesk.server.host import EngineHost

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

    from ragdesk.core.engine.api import Engine

log = logging.getLogger(__name__)


def _uvicorn_config(app: ASGIApp, config: ServerConfig) -> uvicorn.Config:
    import uvicorn

    from ragdesk.server.protocol import guarded_protocol

    # h11 and asyncio by name: uvicorn's "auto" picks httptools/uvloop when installed, which
    # are C extensions this app does not ship (and the guarded protocol is h11's).
    return uvicorn.Config(
        app, host=config.host, port=config.port,
        http=guarded_protocol(config.header_timeout_s, config.max_connections),
        loop="asyncio", ws="none", lifespan="off", log_level="warning",
        timeout_graceful_shutdown=5, timeout_keep_alive=config.keep_alive_s,
        # a belt to the protocol's braces: uvicorn answers 503 beyond it on its own
        limit_concurrency=config.max_connections + 1, backlog=config.backlog,
        h11_max_incomplete_event_size=config.max_header_bytes)


def serve(config: ServerConfig, loader: Callable[[], Engine],
          on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted. The engine loads in the background; until it is ready,
    questions get 503 and ``/health`` says ``loading``."""
    import uvicorn

    check_bind(config)
    host = EngineHost(loader, config.queue_limit)
    host.start()
    server = uvicorn.Server(_uvicorn_config(create_app(host, config), config))
    if on_ready is not None:
        threading.Thread(target=_announce, args=(server, config, on_ready),
                         daemon=True).start()
    try:
        server.run()
    finally:
        host.close()


def _announce(server: uvicorn.Server, config: ServerConfig,
              on_ready: Callable[[str], None]) -> None:
    while not server.started and not server.should_exit:
        time.sleep(0.05)
    if server.started:
        on_ready(f"http://{_url_host(config.host)}:{_bound_port(server, config.port)}")


def _url_host(host: str) -> str:
    """The address a client on this machine uses: for a wildcard bind, loopback (the one
    address of it that the Host allow-list always accepts)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "::1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _bound_port(server: uvicorn.Server, asked: int) -> int:
    """The port listened on: the one asked for, or the one the system chose for port 0."""
    try:
        return int(server.servers[0].sockets[0].getsockname()[1])
    except (AttributeError, IndexError, OSError):
        return asked


@dataclass
class Running:
    url: str  # http://127.0.0.1:PORT
    host: EngineHost
    server: uvicorn.Server


@contextlib.contextmanager
def serve_in_thread(config: ServerConfig, loader: Callable[[], Engine],
                    wait_loaded: bool = True) -> Iterator[Running]:
    """The server on a free port of ``config.host`` (port 0), stopped on exit."""
    import uvicorn

    check_bind(config)
    host = EngineHost(loader, config.queue_limit)
    host.start()
    if wait_loaded:
        host.wait_loaded()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    sock.listen(config.backlog)
    port = sock.getsockname()[1]
    server = uvicorn.Server(_uvicorn_config(create_app(host, config), config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the server thread ended before it started")
            time.sleep(0.02)
        yield Running(f"http://{config.host}:{port}", host, server)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        host.close()
