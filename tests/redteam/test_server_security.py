"""The local API and web pages: a page the user opens can reach a loopback server through DNS
rebinding (its own name resolved to 127.0.0.1, so the browser sends that name as ``Host``)
and through "simple" cross-site requests (a ``text/plain`` POST needs no CORS preflight).
Such requests were answered with passages (200); they are refused before any handler runs.

Driven with a real HTTP client (``http.client``, which lets a test set ``Host``) against the
uvicorn server on a loopback port, with tiny models behind it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.documents.conftest import QUESTION
from tests.server.conftest import send, served_data, server  # noqa: F401  (fixtures)


def _port(run: Any) -> int:
    return int(urlsplit(run.url).port or 0)


RETRIEVE = json.dumps({"query": QUESTION, "n_docs": 2, "retriever": "sparse"}).encode()


def test_the_rebinding_request_of_the_report_is_refused(server: Any) -> None:  # noqa: F811
    """The report's curl: foreign Host and Origin, a text/plain body, answered 200."""
    port = _port(server)
    status, headers, body = send(server.url, "POST", "/v1/retrieve", {
        "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}",
        "Content-Type": "text/plain"}, RETRIEVE)
    assert status == 403, body
    error = json.loads(body)["error"]
    assert error["code"] == "host_not_allowed" and "quokka" not in body.decode()
    assert headers["content-type"] == "application/json"
    assert not any(h.startswith("access-control-") for h in headers)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example",
                                  "localhost.", "localhost.evil.example:80", "[::2]:80",
                                  "127.0.0.2", "", "localhost:80:80", "localhost:http"])
def test_a_foreign_or_malformed_host_is_refused_on_every_endpoint(
        server: Any, host: str) -> None:  # noqa: F811
    for method, path, body in (("GET", "/v1/models", None), ("GET", "/health", None),
                               ("POST", "/v1/retrieve", RETRIEVE)):
        headers = {"Host": host, "Content-Type": "application/json"}
        status, _, got = send(server.url, method, path, headers, body)
        assert status == 403 and json.loads(got)["error"]["code"] == "host_not_allowed", \
            (method, path, got)


def test_loopback_names_are_accepted_on_any_port(server: Any) -> None:  # noqa: F811
    port = _port(server)
    for host in (f"127.0.0.1:{port}", "127.0.0.1", "localhost:1234", "LOCALHOST", "[::1]:9",
                 "[::1]"):
        status, _, body = send(server.url, "POST", "/v1/retrieve",
                               {"Host": host, "Content-Type": "application/json"}, RETRIEVE)
        assert status == 200 and json.loads(body)["data"], (host, body)


@pytest.mark.parametrize("origin", ["http://evil.example:{port}", "https://evil.example",
                                    "null", "http://127.0.0.1.evil.example:{port}",
                                    "file://", "http://127.0.0.1:{port}/path",
                                    "http://user@127.0.0.1:{port}", "ftp://127.0.0.1:{port}",
                                    "chrome-extension://abcdef", "http://127.0.0.1:{other}",
                                    "http://localhost:{other}", "https://[::1]:{other}",
                                    "http://localhost"])
def test_a_foreign_origin_is_refused_with_a_good_host(server: Any,  # noqa: F811
                                                      origin: str) -> None:
    port = _port(server)
    status, headers, body = send(server.url, "POST", "/v1/retrieve", {
        "Host": f"127.0.0.1:{port}", "Origin": origin.format(port=port, other=port + 1),
        "Content-Type": "application/json"}, RETRIEVE)
    assert status == 403 and json.loads(body)["error"]["code"] == "origin_not_allowed", body
    assert not any(h.startswith("access-control-") for h in headers)


def test_this_servers_own_origin_is_accepted(server: Any) -> None:  # noqa: F811
    port = _port(server)
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}",
                   f"https://[::1]:{port}"):
        status, headers, body = send(server.url, "POST", "/v1/retrieve", {
            "Host": f"127.0.0.1:{port}", "Origin": origin,
            "Content-Type": "application/json"}, RETRIEVE)
        assert status == 200, (origin, body)
        assert not any(h.startswith("access-control-") for h in headers)  # no CORS, ever


def test_an_origin_on_the_forwarded_port_it_was_asked_on_is_this_server(
        server: Any) -> None:  # noqa: F811
    """Behind a forwarded port (docker -p 8080:8765) the page, the Host and the Origin all
    say 8080: the same origin, though the socket listens elsewhere."""
    forwarded = _port(server) + 1
    status, _, body = send(server.url, "POST", "/v1/retrieve", {
        "Host": f"localhost:{forwarded}", "Origin": f"http://localhost:{forwarded}",
        "Content-Type": "application/json"}, RETRIEVE)
    assert status == 200, body
    status, _, body = send(server.url, "POST", "/v1/retrieve", {
        "Host": f"localhost:{forwarded}", "Origin": f"http://localhost:{_port(server)}",
        "Content-Type": "application/json"}, RETRIEVE)
    assert status == 403 and json.loads(body)["error"]["code"] == "origin_not_allowed"


@pytest.mark.parametrize("ctype", [None, "text/plain", "text/plain; charset=utf-8",
                                   "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x", "application/jsonp",
                                   "application/json; charset=latin-1",
                                   "application/json; foo=bar"])
def test_a_body_that_is_not_declared_json_gets_415(server: Any,  # noqa: F811
                                                   ctype: str | None) -> None:
    headers = {"Host": "127.0.0.1"}
    if ctype is not None:
        headers["Content-Type"] = ctype
    for path in ("/v1/retrieve", "/v1/chat/completions"):
        status, _, body = send(server.url, "POST", path, headers, RETRIEVE)
        assert status == 415, (ctype, path, body)
        assert json.loads(body)["error"]["code"] == "unsupported_media_type"


def test_json_content_types_with_a_utf8_charset_are_accepted(server: Any) -> None:  # noqa: F811
    for ctype in ("application/json", "application/json; charset=utf-8",
                  "Application/JSON;charset=\"UTF-8\""):
        status, _, body = send(server.url, "POST", "/v1/retrieve",
                               {"Host": "127.0.0.1", "Content-Type": ctype}, RETRIEVE)
        assert status == 200, (ctype, body)


def test_a_cors_preflight_is_never_granted(server: Any) -> None:  # noqa: F811
    port = _port(server)
    status, headers, _ = send(server.url, "OPTIONS", "/v1/chat/completions", {
        "Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert status >= 400 and not any(h.startswith("access-control-") for h in headers)


def test_a_duplicated_host_header_is_refused(server: Any) -> None:  # noqa: F811
    import socket

    host, port = "127.0.0.1", _port(server)
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n"
                     b"Connection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400") or reply.startswith(b"HTTP/1.1 403"), reply


def test_allow_host_adds_a_name_and_the_bind_address_is_allowed() -> None:
    from ragdesk.server import ServerConfig
    from ragdesk.server.run import serve_in_thread

    class Idle:
        pass

    config = ServerConfig(port=0, host="127.0.0.1", allowed_hosts=("ragdesk.lan",))
    loader: Callable[[], Any] = Idle  # an engine stand-in that is never asked anything
    with serve_in_thread(config, loader) as run:
        ok = [send(run.url, "GET", "/v1/models", {"Host": h})[0]
              for h in ("ragdesk.lan:8765", "RAGDESK.LAN", "127.0.0.1:1")]
        refused = [send(run.url, "GET", "/v1/models", {"Host": h})[0]
                   for h in ("other.lan", "ragdesk.lan.evil.example")]
    assert ok == [200, 200, 200] and refused == [403, 403]


def test_allow_any_host_needs_a_key_and_bad_names_are_refused() -> None:
    from ragdesk.core.errors import BadInputError
    from ragdesk.server import ServerConfig, check_bind

    with pytest.raises(BadInputError, match="any web page"):
        check_bind(ServerConfig(allowed_hosts=("*",)))
    check_bind(ServerConfig(allowed_hosts=("*",), api_key="k3y"))
    for bad in ("http://x", "x:80", "a b", "x/y", ""):
        with pytest.raises(BadInputError, match="--allow-host"):
            check_bind(ServerConfig(allowed_hosts=(bad,)))
    check_bind(ServerConfig(allowed_hosts=("my-box.local", "10.0.0.5", "fe80::1")))
