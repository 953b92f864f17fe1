"""How fast ``connectx serve`` answers: the page's first paint and ``/api/move`` latency.

Targets: first paint under 1 s locally; a move answered in under 100 ms for search
policies up to ``minimax:depth=4``. The server runs in this process on 127.0.0.1 (Werkzeug, as
``connectx serve`` runs it); requests go over HTTP with the standard library.

- *first paint*: a fresh page in headless Chromium (Playwright driving the system browser,
  ``apt-get install chromium``; skipped when none starts): the browser's ``first-contentful-paint``
  and the time until the board is drawn (which waits for ``/api/policies`` and ``/api/state``).
- *move latency*: ``POST /api/move`` on positions 0-20 plies into seeded random games on 6x7, per
  policy, after one warm-up request (numba compiles or loads its kernels once per process).

Run::

    python benchmarks/bench_serve.py                 # 10 page loads, 60 moves per policy
    python benchmarks/bench_serve.py --quick         # 3 page loads, 15 moves per policy
    python benchmarks/bench_serve.py --screenshot docs/serve.png   # also the README's picture
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from _machine import machine_line

from connectx_gym.bitboard import Board
from connectx_gym.serve import create_app

SEARCH_POLICIES = [
    "random",
    "onestep",
    "minimax:depth=1",
    "minimax:depth=2",
    "minimax:depth=3",
    "minimax:depth=4",
    "negamax:depth=4",
    "alphabeta:time_budget=0.05",
]
GOAL_MS = 100.0
GOAL_PAINT_S = 1.0
SCREENSHOT_MOVES = [3, 5, 3, 0, 2, 5, 4, 1, 1, 5, 5, 4, 0, 2]  # red to move: every kind of score


@contextmanager
def serving() -> Iterator[str]:
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, create_app("minimax:depth=3"), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def positions(count: int, seed: int = 0) -> list[Board]:
    """Positions 0-20 plies into seeded random games, none finished."""
    rng = np.random.default_rng(seed)
    found: list[Board] = []
    while len(found) < count:
        board, plies = Board.empty(), int(rng.integers(0, 21))
        for _ in range(plies):
            board = board.play(int(rng.choice(board.legal_moves())))
            if board.is_terminal():
                break
        if not board.is_terminal():
            found.append(board)
    return found


def move_latency(base: str, spec: str, boards: list[Board]) -> list[float]:
    def ask(board: Board) -> float:
        body = {"board": board.to_kaggle(), "mark": board.mark, "opponent": spec}
        start = time.perf_counter()
        post(f"{base}/api/move", body)
        return 1000 * (time.perf_counter() - start)

    ask(boards[0])  # warm-up: numba kernels and the policy's tables
    return [ask(board) for board in boards]


def chromium() -> str | None:
    candidates = [os.environ.get("CONNECTX_CHROMIUM")]
    candidates += [shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")]
    return next((path for path in candidates if path), None)


def first_paint(base: str, rounds: int, screenshot: str | None) -> list[tuple[float, float]] | str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped: pip install playwright"
    path = chromium()
    if path is None:
        return "skipped: no Chromium (apt-get install -y chromium)"
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        for _ in range(rounds):
            page = browser.new_page()
            start = time.perf_counter()
            page.goto(f"{base}/")
            page.wait_for_selector("#board .cell")
            drawn = time.perf_counter() - start
            paint = page.evaluate(
                "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN"
            )
            times.append((paint / 1000, drawn))
            page.close()
        if screenshot:
            take_screenshot(browser, base, screenshot)
        browser.close()
    return times


def take_screenshot(browser, base: str, path: str) -> None:
    """The README's picture: a game in progress, the last move marked, the solver's scores."""
    page = browser.new_page(viewport={"width": 1000, "height": 640})
    page.goto(f"{base}/")
    page.wait_for_selector("#board .cell")
    page.evaluate(f"game.moves = {SCREENSHOT_MOVES}; refresh();")
    page.wait_for_selector("#analysis-note.proven, #analysis-note.unproven", timeout=60_000)
    page.screenshot(path=path)
    page.close()
    print(f"screenshot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", "--smoke", action="store_true", help="3 page loads, 15 moves per policy"
    )
    parser.add_argument("--screenshot", help="also save a screenshot of the page to this PNG")
    args = parser.parse_args()
    loads, moves = (3, 15) if args.quick else (10, 60)
    print(machine_line(), flush=True)
    boards = positions(moves)
    with serving() as base:
        paint = first_paint(base, loads, args.screenshot)
        print(f"first paint ({loads} fresh pages, goal < {GOAL_PAINT_S:g} s):")
        if isinstance(paint, str):
            print(f"  {paint}")
        else:
            fcp = statistics.median(p for p, _ in paint)
            drawn = statistics.median(d for _, d in paint)
            verdict = "ok" if max(fcp, drawn) < GOAL_PAINT_S else "SLOW"
            print(f"  first-contentful-paint {fcp:.3f} s, board drawn {drawn:.3f} s  [{verdict}]")
        print(f"\n/api/move latency, ms ({moves} positions, goal < {GOAL_MS:g} ms median):")
        print(f"  {'policy':28} {'median':>8} {'p90':>8} {'max':>8}")
        for spec in SEARCH_POLICIES:
            times = move_latency(base, spec, boards)
            median = statistics.median(times)
            p90 = float(np.percentile(times, 90))
            verdict = "ok" if median < GOAL_MS else "SLOW"
            print(f"  {spec:28} {median:8.1f} {p90:8.1f} {max(times):8.1f}  [{verdict}]")


if __name__ == "__main__":
    main()
