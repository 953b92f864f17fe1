"""Every script in ``benchmarks/`` runs to the end in its quickest mode (``--smoke``).

A crash in a benchmark (the README shows how to run them) would otherwise go unnoticed until
someone runs it for real. Comparisons with optional peers (bitbully, pgx, OpenSpiel, kaggle)
are skipped by the scripts themselves when the peers are missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
PONS = ROOT.parent / "shared" / "data" / "pons"
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_"))
#: Extra arguments, and the modules a script cannot run without.
EXTRA = {
    "bench_solver.py": ["--pons-dir", str(PONS)],
    "gpu_check.py": ["--device", "cpu"],
    "book_fit.py": ["ppo"],
    "book_play.py": ["ppo"],
}
NEEDS = {
    "book_fit.py": ["torch"],
    "bench_phases.py": ["torch", "sb3_contrib"],
    "gpu_check.py": ["torch", "sb3_contrib"],
    "train_speed.py": ["torch", "sb3_contrib"],
    "train_speed_release.py": ["torch", "sb3_contrib"],
    "bench_serve.py": ["flask"],
    "bench_ray_rollouts.py": ["ray", "torch", "sb3_contrib"],
    "bench_ray_labels.py": ["ray"],
    "selfplay_curves.py": ["torch", "sb3_contrib", "matplotlib", "scipy"],
}
#: Scripts that train (a tiny run, labelling included) need more than the others' two minutes.
TIMEOUT = {
    "bench_phases.py": 300,
    "gpu_check.py": 600,
    "selfplay_curves.py": 300,
    "bench_ray_rollouts.py": 300,  # a Ray instance and its actors start (minutes when loaded)
    "bench_ray_labels.py": 300,  # two Ray instances start, 2 chunks labelled in each
}
#: What a script's smoke run must print, beyond something.
PRINTS = {
    "bench_forward.py": ["batch whole", "one piece / pieces of"],
    "book_fit.py": ["bfloat16", "GPU", "random_opening book", "ppo: ", "of 200"],
    "book_play.py": ["bfloat16", "GPU", "random_opening book, positions", "ppo: ", "6 stones"],
    "bench_ray_rollouts.py": ["GPU", "2 Ray worker(s)", "projection", "64 workers"],
    "bench_ray_labels.py": [
        "GPU",
        "one local process",
        "ray, 2 worker(s)",
        "2 Ray workers over 1: x",
        "labels equal to the local ones: yes",
    ],
    "bench_phases.py": ["bfloat16", "GPU", "torch", "| labelling teacher positions |"],
    "bench_search.py": ["bfloat16", "GPU", "| search | score", ">= 0.9 within 50 ms"],
    "selfplay_curves.py": ["bfloat16", "GPU", "mistakes, random-position split", "figure: "],
    "gpu_check.py": [
        "tiny run: ",
        "on cpu",
        "resumed on cpu",
        "one supervised pass",
        "| final panel |",
    ],
}


def script_env() -> dict[str, str]:
    """The environment of a benchmark subprocess: this checkout first on ``PYTHONPATH``."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


def test_every_script_is_covered() -> None:
    assert "bench_solver.py" in SCRIPTS
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_in_smoke_mode(script: str) -> None:
    for module in NEEDS.get(script, []):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    if script == "bench_solver.py" and not PONS.is_dir():
        pytest.skip(f"no Pons benchmark files at {PONS}")
    env = script_env()
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--smoke", *EXTRA.get(script, [])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT.get(script, 120),
    )
    assert result.returncode == 0, (
        f"{script} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    )
    assert result.stdout.strip(), f"{script} printed nothing"
    for text in PRINTS.get(script, []):
        assert text in result.stdout, f"{script} did not print {text!r}:\n{result.stdout[-2000:]}"


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="the GPU check needs torch to say no"
)
def test_the_gpu_check_stops_at_once_without_a_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_check.py"), "--smoke"],
        cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("gpu_check: torch ")
    assert "sees no GPU: run this on a GPU machine" in result.stderr
    assert result.stderr.count("\n") == 1
    assert not result.stdout


@pytest.mark.parametrize("script", ["train_speed.py", "train_speed_release.py"])
def test_training_speed_is_measured_with_the_network_asked_for(script: str) -> None:
    for module in NEEDS[script]:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    env = script_env()
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--smoke", "--blocks", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "4 channels, 2 block(s)" in result.stdout  # the smoke run's channels, the blocks asked


def test_bench_agent_repeats_each_match_once_per_seed(tmp_path: Path) -> None:
    out = tmp_path / "agent.json"
    env = script_env()
    command = [sys.executable, str(BENCHMARKS / "bench_agent.py"), "onestep", "--smoke"]
    result = subprocess.run(
        [*command, "--repeats", "3", "--seed", "5", "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    match = json.loads(out.read_text())["onestep"]["minimax4"]
    assert len(match["scores"]) == 3
    assert match["seeds"] == [5, 6, 7]
    assert match["scores"] == [m["score"] for m in match["matches"]]
    assert match["games"] == sum(m["games"] for m in match["matches"]) == 6
    assert match["score"] == pytest.approx(sum(match["scores"]) / 3)
    # the agent's thinking time in those games: a move-weighted mean of each match's
    per_match = [m["ms_per_move_a"] for m in match["matches"]]
    assert 0 < min(per_match) * 0.999 <= match["ms_per_move"] <= max(per_match) * 1.001
    agent = json.loads(out.read_text())["onestep"]
    assert len(agent["ms_per_move_passes"]) == 1  # one pass in smoke mode; the median of it
    assert agent["ms_per_move"] == agent["ms_per_move_passes"][0]
    refused = subprocess.run(
        [*command, "--repeats", "0"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2
    assert "--repeats must be >= 1" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_release_comparison_keeps_the_callers_python_path(
    monkeypatch: pytest.MonkeyPatch, benchmark_script: Callable[[str], ModuleType]
) -> None:
    """The checkout goes first on ``PYTHONPATH`` without dropping what was there (packages
    installed with ``pip --target`` and found only through it)."""
    release = benchmark_script("train_speed_release.py")
    seen: dict[str, str] = {}

    def run(args: list[str], **options: object) -> subprocess.CompletedProcess:
        seen.update(options["env"])
        return subprocess.CompletedProcess(args, 0, stdout='{"steps_per_second": 1.0}\n')

    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as when the script runs
    import _child

    monkeypatch.setattr(_child, "run", run)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert release.measure(Path("/checkout"), "random", 1, True, (4, 1))["steps_per_second"] == 1
    assert seen["PYTHONPATH"].split(os.pathsep) == ["/checkout", "/elsewhere"]
    monkeypatch.delenv("PYTHONPATH")
    release.measure(Path("/checkout"), "random", 1, True, (4, 1))
    assert seen["PYTHONPATH"] == "/checkout"


def test_the_rollout_scaling_refuses_a_bad_opponent_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_rollout_scaling.py"), "--opponent", "nosuch"],
        cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--opponent 'nosuch': unknown policy 'nosuch'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_solver_benchmark_without_pons_positions_says_where_to_get_them(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "pons"
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_solver.py"), "--pons-dir", str(missing)],
        cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"no Pons benchmark directory at {missing}" in result.stderr
    assert "https://github.com/PascalPons/connect4" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(
    any(importlib.util.find_spec(module) is None for module in NEEDS["gpu_check.py"]),
    reason="the GPU check needs torch and sb3-contrib",
)
def test_the_gpu_check_can_leave_out_its_first_two_parts() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_check.py"), "--device", "cpu", "--smoke",
         "--run-only"],
        cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| final panel |" in result.stdout
    assert "tiny run: " not in result.stdout
    assert "one supervised pass" not in result.stdout


def test_the_device_check_names_its_parts() -> None:
    result = subprocess.run(
        ["bash", str(BENCHMARKS / "device_check.sh"), "gpu"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == "usage: bash benchmarks/device_check.sh cores|run|strong [flags]\n"
    assert not result.stdout  # refused before installing or running anything


def test_a_smoke_run_of_the_selfplay_curves_stays_tiny_whatever_flags_come_with_it(
    benchmark_script: Callable[[str], ModuleType],
) -> None:
    """The docs' 8-minute command with ``--smoke``: the tiny run's flags win over the long ones."""
    pytest.importorskip("scipy")
    from connectx_gym.cli import build_parser

    curves = benchmark_script("selfplay_curves.py")
    long_run = ["--max-minutes", "8", "--final-games", "100", "--panel", "minimax:depth=4"]
    smoke = curves.smoke_args(long_run)
    parsed = build_parser().parse_args(["train", "--preset", "selfplay", *smoke])
    assert parsed.max_minutes == 0
    assert parsed.final_games == 2
    assert parsed.panel == ["random", "minimax:depth=4"]
