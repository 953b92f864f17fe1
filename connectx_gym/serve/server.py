"""The HTTP server of ``connectx serve``: Werkzeug's, with a read timeout on every connection.

A client that opens a connection and sends nothing, or stops halfway through a request, would
hold one of the server's threads for ever; each socket read and write of a connection waits at
most :data:`READ_TIMEOUT` seconds, then the server closes it. Searches are bounded apart from
this (``--move-timeout``): no socket is read while one runs.
"""

from __future__ import annotations

from werkzeug.serving import WSGIRequestHandler

__all__ = ["READ_TIMEOUT", "request_handler"]

#: Seconds a connection may keep the server waiting for its next bytes (or for reading ours).
READ_TIMEOUT = 10.0


def request_handler(read_timeout: float = READ_TIMEOUT) -> type[WSGIRequestHandler]:
    """Werkzeug's request handler whose connections time out after ``read_timeout`` seconds of
    silence (``socketserver`` sets it on each connection's socket)."""
    if not 0 < read_timeout < float("inf"):
        raise ValueError(f"read_timeout must be a finite number of seconds > 0, got {read_timeout}")

    class TimedRequestHandler(WSGIRequestHandler):
        timeout = read_timeout

    return TimedRequestHandler
