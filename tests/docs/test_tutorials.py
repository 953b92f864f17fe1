"""The tutorials of ``docs/tutorials/`` run in their short form and learn something.

Each script's ``main()`` returns its figures; the short runs are seconds long, so what they can
show is bounded: every move legal, the losses finite, and the trained policy scoring against
random moves at least as well as the same network before training (and above 0.7: an untrained
network's fixed preferences score about 0.65-0.75 there). The full-run figures are on the
tutorial pages.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import pytest

pytest.importorskip("sb3_contrib")
pytest.importorskip("pettingzoo")

TUTORIALS = Path(__file__).resolve().parents[2] / "docs" / "tutorials"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tutorial_{name}", TUTORIALS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_short(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--short"])
    return _load(name).main()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["maskable_ppo", "ppo_vector", "selfplay_pettingzoo"])
def test_tutorial_short_run_learns(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _run_short(name, monkeypatch)
    assert figures["illegal_moves"] == 0
    assert figures["timesteps"] >= 2_048
    assert figures["score_vs_random"] >= figures["score_vs_random_untrained"]
    assert figures["score_vs_random"] > 0.7
    assert 0.0 <= figures["score_vs_minimax2"] <= 1.0
    if "all_losses_finite" in figures:
        assert figures["all_losses_finite"] == 1.0


@pytest.mark.parametrize("name", ["maskable_ppo", "ppo_vector", "selfplay_pettingzoo"])
def test_tutorial_page_states_the_full_run(name: str) -> None:
    """The page's table has a measured ``full`` row: steps, CPU time with wall time in minutes,
    and a score against ``minimax:depth=2`` and against random moves."""
    page = (TUTORIALS / f"{name}.md").read_text()
    assert "to be measured" not in page
    assert "KVM guest" in page  # the machine
    (row,) = [line for line in page.splitlines() if line.startswith("| full")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", cells[1])  # the steps
    assert re.match(r"[\d.]+ min \([\d.]+ min", cells[2])  # CPU time (wall time)
    scores = [float(m) for cell in cells[3:] for m in re.findall(r"\b[01]\.\d{3}\b", cell)]
    assert len(scores) >= 2
    assert all(0.0 <= score <= 1.0 for score in scores)


@pytest.mark.slow
def test_cnn_policy_refuses_the_planes_and_the_project_network_takes_them() -> None:
    """What the env page and tutorial (a) say: SB3's ``CnnPolicy`` asserts on the
    ``(2, rows, columns)`` planes; ``MlpPolicy`` with ``ConnectXCNN`` trains on them."""
    from sb3_contrib import MaskablePPO

    from connectx_train.networks import ConnectXCNN

    env = gym.make("ConnectX-v0", opponent="random")
    with pytest.raises(AssertionError):
        MaskablePPO("CnnPolicy", env)
    model = MaskablePPO(
        "MlpPolicy",
        env,
        policy_kwargs={"features_extractor_class": ConnectXCNN},
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        seed=0,
    ).learn(64)
    observation, _ = env.reset(seed=0)
    action, _ = model.predict(observation, action_masks=env.unwrapped.action_masks())
    assert env.unwrapped.action_masks()[int(action)]
