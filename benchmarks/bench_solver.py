"""Exact solver vs bitbully (a C++ Connect Four solver from PyPI) on Pascal Pons' benchmark sets.

Solves every position of each set with :class:`connectx_baselines.solver.Solver` and with bitbully,
in one run and interleaved position by position (so both see the same machine load), checks every
score against the file and prints a markdown table of mean times per position. bitbully is measured
as a user would call it: one ``BitBully`` agent per configuration, kept across positions (its
transposition table too, like ours), timed around ``agent.mtdf(board)``; once without an opening
book (like for like: our solver has none) and, with ``--book``, with its default 12-ply book.

    python benchmarks/bench_solver.py                 # all six sets, 1000 positions each (long)
    python benchmarks/bench_solver.py --quick         # 20 positions per set, Begin-Hard left out
    python benchmarks/bench_solver.py --sets L2_R2 L1_R2 --limit 100 --book
    python benchmarks/bench_solver.py --sets L1_R3 --no-bitbully --start 500 --limit 500  # a half

bitbully is for this benchmark only (``pip install bitbully``), never a dependency of the project;
without it the table shows our times alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _machine import machine_line

from connectx_baselines.position_sets import load_pons
from connectx_baselines.solver import Solver
from connectx_gym import Geometry

SETS = {
    "L3_R1": ("End-Easy", 3.0),
    "L2_R1": ("Middle-Easy", 3.0),
    "L2_R2": ("Middle-Medium", 3.0),
    "L1_R1": ("Begin-Easy", 3.0),
    "L1_R2": ("Begin-Medium", 5.0),
    "L1_R3": ("Begin-Hard", None),
}
DEFAULT_PONS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pons"


def _format_time(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _bitbully_agents(book: bool, wanted: bool = True) -> dict[str, object]:
    if not wanted:
        return {}
    try:
        import bitbully
    except ImportError:
        print("bitbully is not installed: timing our solver alone", file=sys.stderr)
        return {}
    agents: dict[str, object] = {"none": bitbully.BitBully(opening_book=None)}
    if book:
        agents["default"] = bitbully.BitBully()
    return agents


def run(
    pons_dir: Path,
    sets: list[str],
    limit: int | None,
    agents: dict[str, object],
    start: int = 0,
) -> list[dict]:
    """Time positions ``start`` to ``start + limit`` of ``sets`` (all by default) with our solver
    and the bitbully ``agents``; one row of results per set."""
    solver = Solver(Geometry(6, 7, 4))
    solver.reset()  # map the table's memory now, not during the first timed positions
    if agents:
        import bitbully
    rows = []
    for name in sets:
        positions = load_pons(pons_dir / f"Test_{name}")[start:]
        positions = positions[:limit] if limit is not None else positions
        if not positions:
            raise SystemExit(f"no positions of {name} from {start} on")
        ours = 0.0
        theirs = dict.fromkeys(agents, 0.0)
        exact = 0
        wrong_theirs = dict.fromkeys(agents, 0)
        nodes_before = solver.nodes
        for done, position in enumerate(positions, 1):
            started = time.perf_counter()
            score = solver.solve(position.board)
            ours += time.perf_counter() - started
            exact += score == position.score
            if score != position.score:
                print(f"WRONG {name} {position.moves}: {score} != {position.score}", flush=True)
            for key, agent in agents.items():
                board = bitbully.Board([int(c) - 1 for c in position.moves])
                started = time.perf_counter()
                their_score = agent.mtdf(board)
                theirs[key] += time.perf_counter() - started
                wrong_theirs[key] += their_score != position.score
            if done % 100 == 0:
                progress = f"{name}: {done}/{len(positions)}, {exact} exact"
                print(progress, file=sys.stderr, flush=True)
        count = len(positions)
        rows.append(
            {
                "set": name,
                "label": SETS[name][0],
                "target": SETS[name][1],
                "count": count,
                "ours": ours / count,
                "nodes": (solver.nodes - nodes_before) / count,
                "exact": exact,
                "theirs": {key: value / count for key, value in theirs.items()},
                "wrong_theirs": wrong_theirs,
            }
        )
        print(_row(rows[-1], agents), flush=True)
    return rows


def _row(row: dict, agents: dict) -> str:
    cells = [
        f"{row['label']} ({row['set']})",
        str(row["count"]),
        _format_time(row["ours"]),
        f"{row['nodes']:,.0f}",
    ]
    for key in agents:
        theirs = row["theirs"][key]
        cells += [_format_time(theirs), f"{row['ours'] / theirs:.2f}x" if theirs else "-"]
    target = row["target"]
    cells.append(f"<= {target:g}x" if target else "report")
    cells.append(f"{row['exact']}/{row['count']}")
    return "| " + " | ".join(cells) + " |"


def _header(agents: dict) -> str:
    names = {"none": "bitbully (no book)", "default": "bitbully (default book)"}
    columns = ["set", "positions", "ours (mean)", "our nodes"]
    for key in agents:
        columns += [names[key], "ratio"]
    columns += ["target (vs no book)", "exact"]
    return "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pons-dir", type=Path, default=DEFAULT_PONS)
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--limit", type=int, default=None, help="positions per set (default all)")
    parser.add_argument("--start", type=int, default=0, help="skip this many positions per set")
    parser.add_argument("--quick", action="store_true", help="20 positions per set, no Begin-Hard")
    parser.add_argument("--smoke", action="store_true", help="3 positions of End-Easy, ours alone")
    parser.add_argument("--book", action="store_true", help="also time bitbully's default book")
    parser.add_argument("--no-bitbully", action="store_true", help="time and check ours alone")
    args = parser.parse_args(argv)
    sets, limit = args.sets, args.limit
    if args.quick:
        sets = [name for name in sets if name != "L1_R3"] or sets
        limit = limit or 20
    if args.smoke:
        sets, limit, args.no_bitbully = ["L3_R1"], 3, True
    if not args.pons_dir.is_dir():
        parser.error(
            f"no Pons benchmark directory at {args.pons_dir}: download the six Test_L*_R* files "
            "of https://github.com/PascalPons/connect4 into one folder and give it as --pons-dir "
            "(docs/install.md, 'Pascal Pons' benchmark positions')"
        )
    agents = _bitbully_agents(args.book, wanted=not args.no_bitbully)
    print(f"{machine_line()}\n", flush=True)
    print(_header(agents), flush=True)
    rows = run(args.pons_dir, sets, limit, agents, args.start)
    print()
    print(_header(agents))
    for row in rows:
        print(_row(row, agents))
    for row in rows:
        for key, count in row["wrong_theirs"].items():
            if count:
                print(f"bitbully ({key}) disagreed with the file on {count} {row['set']} positions")
    wrong = sum(row["count"] - row["exact"] for row in rows)
    print(f"\nexact on {sum(row['exact'] for row in rows)}/{sum(r['count'] for r in rows)}")
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()
