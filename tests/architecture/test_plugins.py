"""Another installed package adds a policy, a command and a file loader through entry points.

A tiny distribution (``cxplug``) is installed with pip into a temporary folder, then used by name
from a child process that has the folder on its path: ``make_policy``, ``ConnectX-v0``'s opponent,
``connectx evaluate``, its own ``connectx`` command and its file suffix.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from connectx_gym.plugins import COMMANDS_GROUP, LOADERS_GROUP, POLICIES_GROUP, plugins

ROOT = Path(__file__).resolve().parents[2]

PYPROJECT = """
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "cxplug"
version = "0.1"

[project.entry-points."connectx_gym.policies"]
leftmost = "cxplug:LeftmostPolicy"

[project.entry-points."connectx_gym.commands"]
hello = "cxplug.hello"

[project.entry-points."connectx_gym.loaders"]
".leftmost" = "cxplug:load_leftmost"

[tool.setuptools]
packages = ["cxplug"]
"""

PACKAGE = """
import numpy as np
from connectx_gym import Policy


class LeftmostPolicy(Policy):
    name = "leftmost"

    def __init__(self, offset: int = 0) -> None:
        super().__init__()
        self.offset = offset

    def act(self, board, rng):
        legal = np.flatnonzero(board.legal_mask())
        return int(legal[min(self.offset, len(legal) - 1)])


def load_leftmost(path):
    def agent(obs, config):
        return [c for c in range(config.columns) if obs.board[c] == 0][0]

    return agent
"""

COMMAND = """
HELP = "say hello from a plugin"


def add_arguments(parser):
    parser.add_argument("--name", default="world")


def run(args):
    print(f"hello, {args.name}")
    return 0
"""

CHECKS = """
import gymnasium as gym
import numpy as np
from connectx_gym import Board, list_policies, make_policy

assert "leftmost" in list_policies()
policy = make_policy("leftmost:offset=1")
assert type(policy).__name__ == "LeftmostPolicy" and policy.offset == 1
assert policy.act(Board.empty(), np.random.default_rng(0)) == 1
env = gym.make("ConnectX-v0", opponent="leftmost", agent_mark=2)
observation, info = env.reset(seed=0)
assert observation[1, -1, 0] == 1, observation  # the opponent moved first, in column 0
agent_file = make_policy({agent_file!r})
assert agent_file.act(Board.empty(), np.random.default_rng(0)) == 0
print("ok")
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("setuptools")  # the plugin's build backend, without build isolation
    source = tmp_path_factory.mktemp("cxplug_source")
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "cxplug").mkdir()
    (source / "cxplug" / "__init__.py").write_text(textwrap.dedent(PACKAGE))
    (source / "cxplug" / "hello.py").write_text(textwrap.dedent(COMMAND))
    target = tmp_path_factory.mktemp("cxplug_site")
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    install += ["--no-index", "--quiet", "--target", str(target), str(source)]
    completed = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return target


def run_with_plugin(plugin: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    paths = [str(plugin), str(ROOT), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=300, env=environment
    )


@pytest.mark.slow
def test_plugin_policy_by_name_in_make_policy_the_env_and_a_file(
    plugin_path: Path, tmp_path: Path
) -> None:
    agent_file = tmp_path / "agent.leftmost"
    agent_file.write_text("any content: the plugin's loader reads it")
    completed = run_with_plugin(plugin_path, "-c", CHECKS.format(agent_file=str(agent_file)))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "ok"


def test_plugin_policy_in_connectx_evaluate(plugin_path: Path) -> None:
    argv = ["-m", "connectx_gym.cli", "evaluate", "leftmost", "random", "--games", "2"]
    completed = run_with_plugin(plugin_path, *argv)
    assert completed.returncode == 0, completed.stderr
    assert "leftmost" in completed.stdout


@pytest.mark.slow
def test_plugin_command_is_listed_and_runs(plugin_path: Path) -> None:
    listing = run_with_plugin(plugin_path, "-m", "connectx_gym.cli", "--help")
    assert listing.returncode == 0, listing.stderr
    assert "say hello from a plugin" in listing.stdout
    completed = run_with_plugin(plugin_path, "-m", "connectx_gym.cli", "hello", "--name", "you")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "hello, you"


def test_this_distribution_registers_its_search_policies_and_commands() -> None:
    """The search and training packages come through entry points like any plugin (reinstall
    with ``pip install -e .`` when this fails after adding one)."""
    assert {"onestep", "minimax", "negamax", "alphabeta", "solver"} <= set(plugins(POLICIES_GROUP))
    assert {"train", "accuracy", "export-kaggle", "export-onnx"} <= set(plugins(COMMANDS_GROUP))
    assert ".zip" in plugins(LOADERS_GROUP)


def test_the_search_modules_register_their_batch_actors() -> None:
    """The core names no search agent: the modules defining them register their batch actors,
    for exactly their classes (a subclass may play differently, so it plays board by board)."""
    from connectx_baselines.lookahead import MinimaxPolicy
    from connectx_gym.batch import batch_actor
    from connectx_gym.registry import make_policy

    for spec in ("onestep", "minimax:depth=2", "negamax:depth=2"):
        assert batch_actor(make_policy(spec)) is not None, spec

    class Deeper(MinimaxPolicy):
        pass

    assert batch_actor(Deeper(depth=2)) is None
