"""``ragdesk encode`` said it started a local cluster on 127.0.0.1, but Ray's GCS, raylet,
workers and the driver listened on every interface (``ss -ltnp``: ``*:PORT``), and Ray has
no authentication; ``--ray-address 127.0.0.1:1`` retried for minutes and reported the
machine's own address instead. Now every listening socket of the job's processes is on
loopback, and a wrong address fails within seconds, named as given.

One cluster start (the job's own), watched with ``ss -ltnp`` while it runs.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.core.snapshots.util import write_jsonl

pytestmark = pytest.mark.distributed

_PID = re.compile(r"pid=(\d+)")


def _listeners() -> list[tuple[str, str, set[int]]]:
    """(local address, process names, pids) of every listening TCP socket (``ss -ltnpH``)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        procs = " ".join(cols[5:])
        rows.append((cols[3], procs, {int(p) for p in _PID.findall(procs)}))
    return rows


def _host(local: str) -> str:
    return local.rsplit(":", 1)[0].strip("[]").split("%")[0]


def is_loopback(local: str) -> bool:
    host = _host(local)
    if host == "*":
        return False
    addr = ipaddress.ip_address(host)
    mapped = getattr(addr, "ipv4_mapped", None)
    return bool((mapped or addr).is_loopback)


def test_the_address_parser_of_this_test() -> None:
    assert is_loopback("127.0.0.1:8") and is_loopback("[::ffff:127.0.0.1]:33019")
    assert is_loopback("[::1]:9")
    for local in ("*:38621", "0.0.0.0:1", "[::]:2", "192.0.2.2:43349", "[::ffff:10.0.0.1]:5"):
        assert not is_loopback(local)


def _tree(pid: int) -> set[int]:
    psutil = pytest.importorskip("psutil")
    try:
        root = psutil.Process(pid)
        return {pid, *(c.pid for c in root.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


@pytest.fixture()
def source(tiny_models: Any, tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "articles.jsonl", list(tiny_models.corpus)[:12])


def _encode(data: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, "-m", "ragdesk", "--data-dir", str(data),
                             "encode", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_a_local_cluster_listens_on_loopback_only(source: Path, tiny_models: Any,
                                                  tmp_path: Path) -> None:
    pytest.importorskip("ray")
    proc = _encode(tmp_path / "data", str(source), "--encoder", str(tiny_models.ctx_encoder),
                   "--out", str(tmp_path / "shards"), "--actors", "1", "--shard-size", "2",
                   "--batch-size", "2", "--json")
    seen: dict[str, str] = {}  # local address -> process names, of the job's processes
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            tree = _tree(proc.pid)
            for local, names, pids in _listeners():
                if pids & tree:
                    seen[local] = names
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out)["written"] > 0
    names = " ".join(seen.values())
    # the job was watched while its cluster ran: each kind of Ray process was seen
    for kind in ("gcs_server", "raylet", "ray::"):
        assert kind in names, seen
    exposed = {local: who for local, who in seen.items() if not is_loopback(local)}
    assert exposed == {}, f"listening beyond loopback: {exposed}"


@pytest.mark.parametrize("address", ["127.0.0.1:1", "localhost:1"])
def test_a_wrong_address_fails_at_once_as_given(address: str, source: Path,
                                                tiny_models: Any, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    t0 = time.monotonic()
    proc = _encode(tmp_path / "data", str(source), "--encoder", str(tiny_models.ctx_encoder),
                   "--out", str(tmp_path / "shards"), "--ray-address", address)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    elapsed = time.monotonic() - t0
    assert proc.returncode in (1, 2), err[-2000:]
    assert f"No Ray cluster at {address}" in err and "refused" in err, err[-2000:]
    assert elapsed < 30, elapsed


def test_a_listener_that_is_not_ray_fails_within_seconds() -> None:
    import socket

    from ragdesk.core.distributed.loopback import probe
    from ragdesk.core.errors import RagdeskError

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(RagdeskError, match=f"127.0.0.1:{port}"):
            probe("127.0.0.1", port, f"127.0.0.1:{port}", 15)
        assert time.monotonic() - t0 < 7


def test_a_malformed_address_is_a_usage_error() -> None:
    from ragdesk.core.distributed.loopback import parse_address
    from ragdesk.core.errors import BadInputError

    assert parse_address("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert parse_address("[::1]:6379") == ("::1", 6379)
    assert parse_address("ray://head:10001") == ("head", 10001)
    for bad in ("head", "head:", ":6379", "head:0", "head:99999", "head:port"):
        with pytest.raises(BadInputError, match="HOST:PORT"):
            parse_address(bad)
