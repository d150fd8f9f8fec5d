"""A local Ray cluster that listens on 127.0.0.1 only, and a bounded connect to a given one.

Ray has no authentication, and a plain ``ray.init()`` on Linux listens on every interface:
it replaces a loopback node address (``_node_ip_address="127.0.0.1"``) by the machine's
own address, and its gRPC servers (GCS, raylet, every worker and the driver) bind
``0.0.0.0`` unless the node address is 127.0.0.1. It keeps a loopback address only when it
runs single-node, as it does by default on macOS and Windows; :func:`single_node` asks for
that, and :func:`check_local_cluster` refuses a cluster that came up otherwise (a Ray that
changed how this works), so the job fails rather than listening on the network.

A given ``--ray-address`` is used as given. Ray retries an address where no cluster answers
for many minutes (and reports it under the machine's address instead of 127.0.0.1), so
:func:`probe` tries a TCP connection first and :func:`deadline` bounds Ray's own connect.
"""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import os
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ragdesk.core.errors import BadInputError, RagdeskError

SINGLE_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
PROBE_TIMEOUT_S = 5.0
HINT = ("Check the address (`ray status` on the head node prints it), that the cluster runs "
        "and that this machine's Ray version is the cluster's; without --ray-address, "
        "`ragdesk encode` starts its own on 127.0.0.1.")


@contextlib.contextmanager
def single_node() -> Iterator[None]:
    """Ray's single-node setting, in the environment (read by Ray's processes and by
    ``import ray``) and in the module that an already imported Ray consults at call time;
    both restored after."""
    old_env = os.environ.get(SINGLE_NODE_ENV)
    os.environ[SINGLE_NODE_ENV] = "0"
    constants = _ray_constants()
    old_flag = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if isinstance(old_flag, bool):
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop(SINGLE_NODE_ENV, None)
        else:
            os.environ[SINGLE_NODE_ENV] = old_env
        if isinstance(old_flag, bool):
            constants.ENABLE_RAY_CLUSTER = old_flag


def _ray_constants() -> Any:
    try:
        return importlib.import_module("ray._private.ray_constants")
    except ImportError:
        return None


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def check_local_cluster(ray: Any, ctx: Any) -> None:
    """Refuse (and stop) a local cluster whose node or GCS address is not loopback: its
    processes then listen on every interface of this machine."""
    info = getattr(ctx, "address_info", None) or {}
    node = str(info.get("node_ip_address", ""))
    gcs = str(info.get("gcs_address", "")).rpartition(":")[0]
    if is_loopback(node) and is_loopback(gcs):
        return
    ray.shutdown()
    raise RagdeskError(
        f"The local Ray cluster came up on {node or gcs or 'an unknown address'}, not "
        "127.0.0.1: its processes would accept connections from the network, and Ray has "
        "no authentication. Stopped it.",
        "Start a cluster yourself (`ray start --head --node-ip-address ...` behind a "
        "firewall) and pass --ray-address HOST:PORT.")


def parse_address(address: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` or ``[V6]:PORT`` (``ray://`` allowed in front)."""
    rest = address.strip().removeprefix("ray://")
    if rest.startswith("["):
        host, sep, port = rest[1:].partition("]:")
    else:
        host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInputError(f"--ray-address must be HOST:PORT (the head node's GCS address, "
                            f"port 6379 by default), not {address!r}.")
    return host, int(port)


# An HTTP/2 client's connection preface and an empty SETTINGS frame: a gRPC server (Ray's
# GCS is one) answers with a SETTINGS frame of its own at once.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04


def probe(host: str, port: int, address: str, timeout_s: float) -> None:
    """Fail within seconds when nothing at the address speaks gRPC, instead of leaving it
    to Ray's minutes of retries: a TCP connection, then the HTTP/2 greeting every gRPC
    server answers (skipped with TLS, RAY_USE_TLS, whose greeting is another)."""
    wait = min(timeout_s, PROBE_TIMEOUT_S)
    try:
        with socket.create_connection((host, port), timeout=wait) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            sock.sendall(_H2_PREFACE)
            head = _recv_exactly(sock, 9)
    except ConnectionRefusedError:
        raise RagdeskError(f"No Ray cluster at {address}: the connection was refused "
                           "(nothing listens on that port).", HINT) from None
    except socket.gaierror as exc:
        raise RagdeskError(f"No Ray cluster at {address}: the host name does not resolve "
                           f"({exc.strerror or exc}).", HINT) from None
    except TimeoutError:
        raise RagdeskError(f"No Ray cluster at {address}: nothing answered within "
                           f"{wait:g} s.", HINT) from None
    except OSError as exc:
        raise RagdeskError(f"No Ray cluster at {address}: {exc.strerror or exc}.",
                           HINT) from None
    if len(head) < 9 or head[3] != _H2_SETTINGS:
        raise RagdeskError(f"No Ray cluster at {address}: something listens there, but it "
                           "does not speak gRPC (Ray's GCS does).", HINT)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            break
        data += part
    return data


class _Expired(BaseException):
    """Raised by the alarm inside ``ray.init``: a BaseException, so that Ray's own
    ``except Exception`` retry loops do not swallow it."""


@contextlib.contextmanager
def deadline(seconds: float, address: str) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (POSIX, main thread: an interval timer; where
    there is none, the block runs unbounded and the probe is the only bound)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not \
            threading.main_thread():
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Expired:
        raise RagdeskError(f"No Ray cluster answered at {address} within {seconds:g} s "
                           "(something listens there, but not a Ray head node's GCS).",
                           HINT) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
