"""Who may use ``connectx serve`` and for how long: linear body checks, JSON bodies only, the
page's own Host and Origin (or allowed ones), and connections that time out."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("flask", reason='the serve extra is not installed: pip install ".[serve]"')

from werkzeug.serving import make_server

from connectx_gym.serve import create_app
from connectx_gym.serve.access import RequestGuard, normal_origin
from connectx_gym.serve.policies import LIMITS
from connectx_gym.serve.server import READ_TIMEOUT, request_handler
from connectx_gym.serve.validation import (
    MAX_BODY_BYTES,
    MAX_NESTING,
    ApiError,
    nesting_depth,
    read_json,
)
from connectx_gym.serve.worker import MAX_MOVE_TIMEOUT

DOCS = Path(__file__).resolve().parents[3] / "docs" / "serve.md"
EMPTY = {"board": [0] * 42}


def depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='ab"\\[]{}\n\u00e9'),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='k"\\[]{}', max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans())
def test_nesting_depth_is_the_parsed_values_depth(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert nesting_depth(text.encode()) == depth(value)


class Body:
    """A request stream of ``data``."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int) -> bytes:
        part, self.data = self.data[:size], self.data[size:]
        return part


ADVERSARIAL_BODIES = {
    # a string that never ends, of escaped quotes: a quarter of the limit, then the limit
    "escaped quotes": b'"' + b'\\"' * (MAX_BODY_BYTES // 8),
    "escaped quotes at the limit": b'"' + b'\\"' * ((MAX_BODY_BYTES - 1) // 2),
    "escaped backslashes": b'["' + b"\\\\" * ((MAX_BODY_BYTES - 4) // 2) + b'"]',
    "brackets": b"[" * MAX_BODY_BYTES,
    "strings of brackets": b'["[",' + b'"[",' * (MAX_BODY_BYTES // 4 - 3) + b'"["]',
}


@pytest.mark.parametrize("name", ADVERSARIAL_BODIES)
def test_any_body_up_to_the_limit_is_read_in_linear_time(name: str) -> None:
    body = ADVERSARIAL_BODIES[name]
    assert len(body) <= MAX_BODY_BYTES
    start = time.perf_counter()
    status = 200
    try:
        read_json(Body(body), len(body))
    except ApiError as error:
        status = error.status
    assert time.perf_counter() - start < 1.0
    assert status in (200, 400)


def test_a_body_must_be_json_by_its_content_type() -> None:
    client = create_app("random").test_client()
    text = json.dumps(EMPTY)
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "", "text/json"]:
        answer = client.post("/api/state", data=text, content_type=content_type)
        assert answer.status_code == 415, content_type
        assert "Content-Type: application/json" in answer.get_json()["error"]
    answer = client.post("/api/state", data=text, content_type="application/json; charset=utf-8")
    assert answer.status_code == 200
    assert client.get("/api/policies").status_code == 200  # no body, no content type needed


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost", 200),
        ("127.0.0.1:8000", 200),
        ("[::1]:8000", 200),
        ("LOCALHOST:5000", 200),
        ("192.168.1.5:8000", 200),  # the address it listens on
        ("evil.example", 403),  # a name pointing at this machine: DNS rebinding
        ("evil.example:8000", 403),
        ("127.0.0.1.evil.example", 403),
        ("0.0.0.0:8000", 403),
        ("", 403),
    ],
)
def test_requests_must_address_this_server(host: str, status: int) -> None:
    client = create_app("random", host="192.168.1.5").test_client()
    for answer in (
        client.post("/api/state", json=EMPTY, headers={"Host": host}),
        client.get("/", headers={"Host": host}),
    ):
        assert answer.status_code == status, answer.get_json()
        if status == 403:
            assert "not this server's address" in answer.get_json()["error"]


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://127.0.0.1:8000", 200),  # the page itself
        ("http://Pc.Lan:8000/", 200),  # allowed
        ("https://tools.example", 200),
        ("http://evil.example", 403),
        ("http://127.0.0.1:9000", 403),  # another local page
        ("https://127.0.0.1:8000", 403),
        ("http://pc.lan:8001", 403),
        ("null", 403),  # sandboxed frames, files
    ],
)
def test_requests_from_pages_must_come_from_the_page_or_an_allowed_origin(
    origin: str, status: int
) -> None:
    allowed = ["http://pc.lan:8000", "https://tools.example"]
    client = create_app("random", allow_origins=allowed).test_client()
    headers = {"Host": "127.0.0.1:8000", "Origin": origin}
    answer = client.post("/api/state", json=EMPTY, headers=headers)
    assert answer.status_code == status, answer.get_json()
    if status == 403:
        assert "--allow-origin" in answer.get_json()["error"]
    # An allowed origin's host may be addressed too; without an Origin (curl, Python) as well.
    assert client.post("/api/state", json=EMPTY, headers={"Host": "pc.lan:8000"}).status_code == 200


@pytest.mark.parametrize(
    "origin", ["pc.lan", "ftp://pc.lan", "http://pc.lan/page", "http://pc.lan:x", "http://u@pc"]
)
def test_malformed_origins_are_refused(origin: str) -> None:
    with pytest.raises(ValueError, match="expected scheme://host"):
        normal_origin(origin)
    with pytest.raises(ValueError, match="expected scheme://host"):
        create_app("random", allow_origins=[origin])


def test_listening_on_every_interface_allows_no_other_name() -> None:
    assert RequestGuard.serving("0.0.0.0").hosts == RequestGuard.serving(None).hosts
    assert "::1" in RequestGuard.serving("[::]").hosts


@pytest.fixture
def server() -> Iterator[int]:
    app = create_app("random")
    handler = request_handler(1.0)
    listening = make_server("127.0.0.1", 0, app, threaded=True, request_handler=handler)
    thread = threading.Thread(target=listening.serve_forever, daemon=True)
    thread.start()
    yield listening.port
    listening.shutdown()


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"POST /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # stops inside the headers
        b"POST /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{",  # stops inside the body
    ],
    ids=["silent", "in the headers", "in the body"],
)
def test_a_stalled_connection_is_closed_at_the_read_timeout(server: int, sent: bytes) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=10) as connection:
        connection.sendall(sent)
        start = time.monotonic()
        received = b""
        while chunk := connection.recv(4096):  # until the server closes it (bounded: timeout)
            received += chunk
        waited = time.monotonic() - start
    assert 0.5 < waited < 5, waited
    assert received == b"" or received.startswith(b"HTTP/1.1 408"), received[:200]
    assert b"Traceback" not in received


def test_the_read_timeout_leaves_normal_requests_alone(server: int) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    try:
        for _ in range(3):  # one kept-alive connection, several requests
            connection.request(
                "POST", "/api/state", json.dumps(EMPTY), {"Content-Type": "application/json"}
            )
            answer = connection.getresponse()
            assert answer.status == 200
            answer.read()
    finally:
        connection.close()


def test_the_docs_state_the_caps_the_server_uses() -> None:
    text = " ".join(DOCS.read_text().split())
    assert f"`--move-timeout` (15 s; at most {MAX_MOVE_TIMEOUT:g})" in text
    assert f"at most {READ_TIMEOUT:g} s for its next bytes" in text
    assert f"nests deeper than {MAX_NESTING} levels" in text
    assert f"a body over {MAX_BODY_BYTES // 1024} KiB" in text
    for key in ("depth", "max_depth", "time_budget", "table_bits"):
        found = re.search(rf"`{key}` (\d+(?:\.\d+)?)", text)
        assert found, f"docs/serve.md does not state the cap of {key}"
        assert float(found.group(1)) == LIMITS[key], key
