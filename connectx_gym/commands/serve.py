"""``connectx serve``: a local web page to play agents, replay saved games and analyse positions."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from connectx_gym.commands import CommandError, bounded_int, positive_float
from connectx_gym.serve.worker import MAX_MOVE_TIMEOUT

__all__ = ["add_arguments", "run"]

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "play, replay and analyse games in the browser"

#: How long the warm-up's move and analysis may take: on a fresh install they compile numba's
#: kernels (the analysis alone took over 15 s, the default --move-timeout, on 2 cores).
WARM_UP_SECONDS = 180.0

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine)"
    )
    parser.add_argument("--port", type=bounded_int(0, 65535), default=8000, help="port (8000)")
    parser.add_argument(
        "--opponent", default="minimax:depth=3", help="the page's default opponent (a policy spec)"
    )
    parser.add_argument(
        "--models",
        default=None,
        help="directory of saved agents (.npz, .py) the page may load; none without it",
    )
    parser.add_argument(
        "--move-timeout",
        type=move_timeout,
        default=15.0,
        help=f"seconds a request waits for a search before a 503 answer (15; at most "
        f"{MAX_MOVE_TIMEOUT:g})",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also answer pages at ORIGIN (scheme://host[:port]) and requests addressed to its "
        "host; repeatable (default: only this machine's names, the --host address and the "
        "page's own origin)",
    )


def move_timeout(text: str) -> float:
    """An argparse type: seconds in (0, MAX_MOVE_TIMEOUT]."""
    value = positive_float(text)
    if value > MAX_MOVE_TIMEOUT:
        raise argparse.ArgumentTypeError(f"must be <= {MAX_MOVE_TIMEOUT:g} seconds, got {text}")
    return value


move_timeout.__name__ = "number"


def run(args: argparse.Namespace) -> int:
    try:
        from werkzeug.serving import run_simple

        from connectx_gym.serve.access import normal_origin
        from connectx_gym.serve.app import close_app, create_app, patient
        from connectx_gym.serve.server import request_handler
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("flask", "werkzeug"):
            raise
        raise CommandError(
            f'the page needs Flask: pip install "connectx-gym[serve]" ({error})'
        ) from None
    if args.models is not None and not Path(args.models).is_dir():
        raise CommandError(f"--models {args.models}: not a directory")
    for origin in args.allow_origin:
        try:
            normal_origin(origin)
        except ValueError as error:
            raise CommandError(f"--allow-origin: {error}") from None
    app = create_app(
        args.opponent,
        models=args.models,
        move_timeout=args.move_timeout,
        host=args.host,
        allow_origins=args.allow_origin,
    )
    try:
        with patient(app, WARM_UP_SECONDS):
            _warm_up(app, args.opponent)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            logger.warning(
                "listening on %s: anyone who reaches it can use the page (by the names "
                "localhost, 127.0.0.1, %s and the --allow-origin hosts)",
                args.host,
                args.host,
            )
        # the address is the command's answer: on stdout, also with --quiet
        print(f"connectx serve: http://{args.host}:{args.port}/ (Ctrl+C to stop)", flush=True)
        # Ctrl-C ends run_simple; every other thread is a daemon and the agents' processes are
        # killed here, so nothing keeps the process alive after it.
        run_simple(args.host, args.port, app, threaded=True, request_handler=request_handler())
    finally:
        close_app(app)
    return 0


def _warm_up(app: object, opponent: str) -> None:
    """One move and one analysis before listening: numba compiles or loads its kernels now, and
    an opponent that fails (an agent file that raises or exits) is refused at start."""
    logger.info("connectx serve: loading the search kernels (a first start compiles them)...")
    client = app.test_client()  # type: ignore[attr-defined]
    board = [0] * 42
    board[38] = 1  # 6x7, mark 1 in the centre column: quick for every policy
    for path, body in (("/api/move", {"mark": 2}), ("/api/analyse", {"time_budget": 0.2})):
        answer = client.post(path, json={"board": board, **body})
        if answer.status_code == 200:
            continue
        error = answer.get_json().get("error")
        if path == "/api/move" and answer.status_code >= 500 and answer.status_code != 503:
            raise CommandError(f"--opponent {opponent}: {error}")
        logger.warning("warm-up %s: %s", path, error)
