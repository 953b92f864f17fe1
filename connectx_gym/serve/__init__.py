"""``connectx serve``: a local web page to play agents, replay saved games and analyse positions.

:func:`create_app` builds the Flask app (``pip install "connectx-gym[serve]"``); the JSON API it
serves is documented in :mod:`connectx_gym.serve.app` and the README.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask

__all__ = ["SERVE_HINT", "create_app"]

SERVE_HINT = 'connectx serve needs Flask: pip install "connectx-gym[serve]"'


def create_app(*args: Any, **kwargs: Any) -> Flask:
    """The app of :func:`connectx_gym.serve.app.create_app` (imports Flask only when called)."""
    try:
        from connectx_gym.serve.app import create_app as create
    except ImportError as error:
        if getattr(error, "name", None) in ("flask", "werkzeug"):
            raise ImportError(f"{SERVE_HINT} ({error})") from None
        raise
    return create(*args, **kwargs)
