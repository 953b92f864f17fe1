"""Docs that cannot rot: the README stays short and undated, the site builds in strict mode, and
every ``python`` and shell block of the README and of ``docs/`` runs.

Blocks run page by page, in order, in a temporary folder that holds ``runs/connectx/final.npz``
(a copy of the shipped ``ppo`` weights), a link to ``benchmarks/`` and, when the repository has
one beside it, ``../shared`` (Pascal Pons' positions). Python blocks are executed in a fresh
namespace each; shell blocks run in bash with ``connectx`` standing for ``python -m
connectx_gym.cli`` in a quick mode: ``train`` gets a few hundred steps of a tiny network,
``evaluate``/``tournament`` a few games, ``accuracy --pons`` a few positions of each set,
``serve`` starts in the background on a free port (the page's ``:8000`` points there) and
``play`` reads ``q``; ``python benchmarks/X.py`` gets
``--smoke`` (with no arguments that is tests/benchmarks' own smoke run, so it only checks the
script is there). A block preceded by ``<!-- skip: reason -->`` is not run (the count is bounded
below); ``<!-- requires: module ... -->`` runs it only where those modules are installed, and an
entry with a slash is a path from the repository's root that must exist (``../shared/data/pons``
for a block whose script reads Pons' positions by default).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from connectx_gym.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOC_PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
SHARED = ROOT.parent / "shared"
#: the most blocks that may say ``<!-- skip: ... -->`` (installs, a cluster, the whole suite)
MAX_SKIPPED = 8
README_MAX_LINES = 250

LANGUAGES = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "shell": "shell"}
FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)\s*$")
COMMENT = re.compile(r"^<!--\s*(skip|requires)\s*:\s*(.*?)\s*-->$")
SLOW = re.compile(r"connectx train|\.learn\(|benchmarks/|--ray|rllib|connectx serve")
DATE = re.compile(
    r"\b20\d\d-\d\d-\d\d\b|\b(?:January|February|March|April|May|June|July|August|September|"
    r"October|November|December)\s+(?:\d{1,2},?\s+)?20\d\d\b",
)

#: the most positions of each Pons set that ``connectx accuracy --pons DIR --limit N`` judges in
#: quick mode
QUICK_PONS_LIMIT = 5
#: what ``connectx train`` gets in quick mode (later flags override the block's own)
QUICK_TRAIN = [
    "--timesteps", "256", "--n-envs", "2", "--n-steps", "128", "--batch-size", "128",
    "--n-epochs", "1", "--channels", "8", "--blocks", "1", "--features-dim", "32",
    "--panel", "random", "--eval-every", "0", "--final-games", "2", "--checkpoint-every", "256",
    "--snapshot-every", "256", "--no-progress-bar", "--torch-threads", "1",
    "--teacher-positions", "0", "--teacher-book", "none",
    # the quick network is smaller than the shipped ones a preset may start from
    "--init-weights", "",
]  # fmt: skip

SHIM = '''\
"""``connectx`` in the docs tests' quick mode (see tests/test_docs.py)."""
import os, socket, subprocess, sys, time

argv = sys.argv[1:]
command = next((a for a in argv if not a.startswith("-")), None)
if command == "train":
    argv += QUICK_TRAIN
elif command in ("evaluate", "tournament") and "--games" not in argv:
    argv += ["--games", "4"]
elif command == "accuracy" and "--pons" in argv and "--limit" in argv:
    at = argv.index("--limit") + 1  # each judged position is solved move by move: minutes at 200
    argv[at] = str(min(int(argv[at]), QUICK_PONS_LIMIT))
elif command == "serve":
    port = int(os.environ["DOCS_PORT"])
    log = open(os.environ["DOCS_SERVERS"] + ".log", "ab")  # not the caller's pipes
    server = subprocess.Popen(
        [sys.executable, "-m", "connectx_gym.cli", *argv, "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )
    with open(os.environ["DOCS_SERVERS"], "a") as pids:
        pids.write(f"{server.pid}\\n")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(server.returncode or 1)
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                sys.exit(0)
        time.sleep(0.2)
    sys.exit("connectx serve did not start listening")
os.execv(sys.executable, [sys.executable, "-m", "connectx_gym.cli", *argv])
'''

BASH_PREAMBLE = """\
set -euo pipefail
python() {
    if [[ "${1:-}" == benchmarks/*.py && $# -eq 1 ]]; then
        [[ -f "$1" ]] || { echo "no benchmark $1" >&2; return 1; }
        echo "$1 --smoke: run by tests/benchmarks/test_benchmarks.py"  # the same command
    elif [[ "${1:-}" == benchmarks/*.py ]]; then command python "$@" --smoke
    else command python "$@"; fi
}
"""


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page."""

    page: Path
    line: int
    kind: str  # "python" or "shell"
    code: str
    skip: str | None
    requires: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def extract_blocks(page: Path) -> list[Block]:
    """The ``python`` and shell blocks of ``page`` with the comments just above them."""
    blocks: list[Block] = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, language = match.groups()
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        kind = LANGUAGES.get(language.lower())
        if kind is not None:
            skip, requires = None, ()
            above = index - 1
            while above >= 0 and (comment := COMMENT.match(lines[above].strip())):
                if comment.group(1) == "skip":
                    skip = comment.group(2)
                else:
                    requires = (*requires, *comment.group(2).split())
                above -= 1
            code = "\n".join(lines[index + 1 : end])
            blocks.append(Block(page, index + 1, kind, code, skip, requires))
        index = end + 1
    return blocks


ALL_BLOCKS = [block for page in DOC_PAGES for block in extract_blocks(page)]
PAGES_WITH_BLOCKS = sorted({block.page for block in ALL_BLOCKS})


def _page_param(page: Path) -> object:
    slow = any(SLOW.search(b.code) for b in ALL_BLOCKS if b.page == page and b.skip is None)
    marks = [pytest.mark.slow] if slow else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(ROOT)))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _workspace(tmp_path: Path) -> Path:
    """A folder to run a page's blocks in, with what they expect around them."""
    work = tmp_path / "work"
    (work / "runs" / "connectx").mkdir(parents=True)
    shipped = ROOT / "connectx_gym" / "data" / "ppo.npz"
    shutil.copy(shipped, work / "runs" / "connectx" / "final.npz")
    (work / "benchmarks").symlink_to(ROOT / "benchmarks")
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED)
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "connectx"
    shim.write_text(
        f"#!{sys.executable}\n"
        + SHIM.replace("QUICK_TRAIN", repr(QUICK_TRAIN), 1).replace(
            "QUICK_PONS_LIMIT", str(QUICK_PONS_LIMIT), 1
        )
    )
    shim.chmod(0o755)
    # a script, not a link: a link to a venv's interpreter, outside the venv, finds no
    # pyvenv.cfg beside it and runs the base interpreter, without the venv's packages
    python = shim_dir / "python"
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    return work


def _missing(block: Block) -> list[str]:
    missing = []
    for needed in block.requires:
        if "/" in needed:  # a folder or file the block reads, from the repository's root
            if not (ROOT / needed).exists():
                missing.append(needed)
            continue
        try:  # imported, not only found: ray.rllib is present but fails without its extras
            importlib.import_module(needed)
        except Exception:
            missing.append(needed)
    return missing


def _run_python(block: Block, work: Path) -> None:
    previous = Path.cwd()
    os.chdir(work)
    try:
        exec(compile(block.code, block.where, "exec"), {"__name__": "__docs__"})
    finally:
        os.chdir(previous)


def _run_shell(block: Block, work: Path, port: int, servers: Path) -> None:
    code = block.code.replace(":8000", f":{port}")
    env = {
        **os.environ,
        "PATH": f"{work.parent / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MPLBACKEND": "Agg",
        "DOCS_PORT": str(port),
        "DOCS_SERVERS": str(servers),
    }
    result = subprocess.run(
        ["bash", "-c", BASH_PREAMBLE + code],
        cwd=work,
        env=env,
        input="q\n" * 50,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (
        f"{block.where} failed ({result.returncode}):\n{code}\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}"
    )


def _stop_servers(servers: Path) -> None:
    if not servers.exists():
        return
    for pid in servers.read_text().split():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pid), signal.SIGTERM)


@pytest.mark.parametrize("page", [_page_param(page) for page in PAGES_WITH_BLOCKS])
def test_code_blocks_run(page: Path, tmp_path: Path) -> None:
    work = _workspace(tmp_path)
    port, servers = _free_port(), tmp_path / "servers.txt"
    ran, not_here = 0, []
    try:
        for block in (b for b in ALL_BLOCKS if b.page == page):
            if block.skip is not None:
                continue
            missing = _missing(block)
            if "../shared/" in block.code and not SHARED.is_dir():
                missing.append(str(SHARED))
            if missing:
                not_here.append(f"{block.where} needs {', '.join(missing)}")
                continue
            if block.kind == "python":
                _run_python(block, work)
            else:
                _run_shell(block, work, port, servers)
            ran += 1
    finally:
        _stop_servers(servers)
    if not ran:
        pytest.skip("; ".join(not_here) or "every block of the page is marked skip")


def test_the_blocks_python_is_this_interpreter_with_its_packages(tmp_path: Path) -> None:
    """In a virtual environment too: ``python`` in a shell block runs with this interpreter's
    prefix (its venv), where the installed packages are."""
    _workspace(tmp_path)
    answer = subprocess.run(
        [str(tmp_path / "bin" / "python"), "-c", "import sys, connectx_gym; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert answer.stdout.strip() == sys.prefix


def test_a_benchmark_without_arguments_is_left_to_its_smoke_test_but_must_exist() -> None:
    """A block's ``python benchmarks/X.py`` is tests/benchmarks' own smoke run, so it is not run
    twice; a block naming a script that is not there still fails."""

    def block(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", BASH_PREAMBLE + line], cwd=ROOT, capture_output=True, text=True
        )

    there = block("python benchmarks/bench_env.py  # a comment")
    assert there.returncode == 0
    assert "run by tests/benchmarks/test_benchmarks.py" in there.stdout
    missing = block("python benchmarks/no_such_benchmark.py")
    assert missing.returncode != 0
    assert "no benchmark benchmarks/no_such_benchmark.py" in missing.stderr


def test_blocks_are_found_and_few_are_skipped() -> None:
    assert len(ALL_BLOCKS) >= 30
    assert any(b.page == README and b.kind == "python" and b.skip is None for b in ALL_BLOCKS)
    skipped = [b for b in ALL_BLOCKS if b.skip is not None]
    assert all(b.skip for b in skipped), "a skip mark needs a reason"
    assert len(skipped) <= MAX_SKIPPED, [f"{b.where}: {b.skip}" for b in skipped]
    ran = len(ALL_BLOCKS) - len(skipped)
    print(f"{ran} of {len(ALL_BLOCKS)} code blocks run; skipped: {len(skipped)}")


def test_readme_is_short_and_undated() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    assert DATE.findall(text) == []
    assert not re.search(r"\bissue \d+|\brevision [0-9a-f]{7}", text)


def test_date_pattern_catches_dates() -> None:
    assert DATE.search("measured 2026-11-25, 22:44")
    assert DATE.search("on November 2026")
    assert DATE.search("on November 25, 2026")
    assert not DATE.search("1,001,472 steps in 26.9 minutes; 2,048 steps")


def _subcommand(command: str) -> argparse.ArgumentParser:
    """The parser of ``connectx COMMAND``, as ``connectx COMMAND --help`` prints it."""
    action = next(a for a in build_parser(command)._actions if a.dest == "command")
    assert isinstance(action.choices, dict)
    return action.choices[command]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_texts_are_undated(command: str) -> None:
    text = _subcommand(command).format_help()
    assert DATE.findall(text) == []
    assert "session" not in text.lower()


def test_train_help_is_grouped() -> None:
    sub = _subcommand("train")
    titles = [group.title for group in sub._action_groups]
    for title in ("run and output", "opponents and curriculum", "PPO", "network", "evaluation"):
        assert title in titles
    assert any(title and title.startswith("teacher") for title in titles)
    assert "performance" in titles
    text = sub.format_help()
    assert "minimax:depth=2@3+onestep" in text
    assert "--opponent minimax:depth=3" in text


def test_readme_test_command_is_what_ci_runs() -> None:
    blocks = [b for b in extract_blocks(README) if "python -m pytest" in b.code]
    assert len(blocks) == 1
    assert blocks[0].code.strip() in (ROOT / ".ci" / "run").read_text()


def test_site_builds_in_strict_mode(tmp_path: Path) -> None:
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            pytest.skip(f"{module} is not installed (pip install -e '.[docs]')")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, textwrap.shorten(output, 4000)
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "api" / "index.html").exists()
    assert "make_policy" in (tmp_path / "site" / "api" / "index.html").read_text()
