"""Which requests ``connectx serve`` answers: its own page's and programs', not other sites'.

A browser lets any web page send a request to ``127.0.0.1:8000``; what stops a page from another
site using the API is checked on every request (:meth:`RequestGuard.check`):

- ``Host`` must name this server: ``localhost``, ``127.0.0.1``, ``::1``, the address it listens
  on (not a wildcard such as ``0.0.0.0``) or the host of an allowed origin. A site whose name
  points at ``127.0.0.1`` (DNS rebinding) sends its own name, and is refused (403).
- ``Origin``, which browsers send with their requests from pages, must be the server's own
  (``http://`` and the ``Host``) or an allowed origin (``--allow-origin``); programs that send
  none (curl, Python) are not browsers and pass (403 otherwise).
- A body must be ``Content-Type: application/json`` (415 otherwise): the types a page of another
  site may send without asking first (forms, ``text/plain``) are not JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from connectx_gym.serve.validation import ApiError, shown

__all__ = ["LOCAL_HOSTS", "RequestGuard", "normal_origin"]

#: The names of this machine a request may always address.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: Addresses to listen on that are not a name requests use (every interface).
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def normal_origin(text: str) -> str:
    """``scheme://host[:port]`` of an origin, lower case; ``ValueError`` for anything else."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port  # refuses a port that is not a number
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise ValueError(
            f"origin {shown(text)}: expected scheme://host[:port], e.g. http://pc:8000"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + ("" if port is None else f":{port}")


def _host_name(host: str) -> str | None:
    """The name in a ``Host`` header (``127.0.0.1:8000``, ``[::1]:8000``), lower case."""
    try:
        return urlsplit(f"//{host}").hostname
    except ValueError:
        return None


@dataclass(frozen=True)
class RequestGuard:
    """The hosts requests may address, and the origins besides the page's own they may come
    from."""

    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def serving(cls, address: str | None = None, allow_origins: Iterable[str] = ()) -> RequestGuard:
        """The guard of a server listening on ``address`` that also allows ``allow_origins``
        (raises ``ValueError`` naming a malformed origin)."""
        origins = frozenset(normal_origin(origin) for origin in allow_origins)
        hosts = set(LOCAL_HOSTS)
        if address is not None and address.strip("[]").lower() not in WILDCARDS:
            hosts.add(address.strip("[]").lower())
        hosts.update(name for origin in origins if (name := urlsplit(origin).hostname))
        return cls(frozenset(hosts), origins)

    def check(self, scheme: str, host: str, origin: str | None, content_type: str | None) -> None:
        """Raise :class:`ApiError` (403, 415) unless a request with these headers may be answered;
        ``content_type`` is the mimetype of a request that has a body, None for one without."""
        if _host_name(host) not in self.hosts:
            raise ApiError(
                f"Host {shown(host)} is not this server's address; start it with --allow-origin "
                "for another name",
                403,
            )
        if origin is not None:
            try:
                allowed = normal_origin(origin) in self.origins
            except ValueError:
                allowed = False
            if not allowed and origin.lower() != f"{scheme}://{host}".lower():
                raise ApiError(
                    f"requests from pages at {shown(origin)} are not allowed; start the server "
                    "with --allow-origin ORIGIN to allow them",
                    403,
                )
        if content_type is not None and content_type != "application/json":
            got = shown(content_type)
            raise ApiError(
                f"the request body must be Content-Type: application/json, got {got}", 415
            )
