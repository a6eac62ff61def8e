"""Shared fixtures for the corpus-recipe tests: fixture-tree builders and a local HTTP server.

``fixtures.py`` is loaded by path (not imported by name) so these tests work whatever pytest
import mode or package layout the rest of the suite uses.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

_NAME = "asr_pe_recipe_test_fixtures"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).with_name("fixtures.py"))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
trees = sys.modules[_NAME]


@pytest.fixture
def build():
    """The fixture-tree builders (tests/recipes/fixtures.py)."""
    return trees


class RangeServer:
    """A localhost HTTP server for bytes in ``files`` that honours ``Range: bytes=N-``.

    Knobs: ``ignore_range`` (answer 200 with the whole body, like servers without Range
    support) and ``truncate_first`` (the first response promises the whole body but the
    connection closes after that many bytes, like a dropped download). ``requests`` records
    (path, Range header) of every request.
    """

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.ignore_range = False
        self.truncate_first: int | None = None
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a stuck client cannot hang the test

            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                server.requests.append((self.path, rng))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                start = 0
                if rng and not server.ignore_range:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                payload = body[start:]
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if server.truncate_first is not None:
                    payload = payload[: server.truncate_first]
                    server.truncate_first = None
                    self.close_connection = True
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def http_server():
    server = RangeServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        server.thread.join(timeout=5)
