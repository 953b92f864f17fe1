"""``--vec-env batched`` (the default): the trainer's opponent slots on one batched env, a CLI run
with resume, and ``--seed`` giving identical weights on the batched and the old path."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import gymnasium as gym
import torch
from stable_baselines3.common.vec_env import VecMonitor
from threadpoolctl import threadpool_info

from connectx_gym import Geometry
from connectx_gym.files import NumpyNetPolicy, save_weights
from connectx_train import run_setup, trainer
from connectx_train.config import TrainConfig
from connectx_train.model import new_model
from connectx_train.networks import ConnectXCNN
from connectx_train.opponents import (
    BatchedOpponentSlots,
    TimedBatchPolicy,
    collect_timing,
    make_vec_env,
    queue_opponents,
)
from connectx_train.run_setup import bf16_native, choose_precision
from connectx_train.teaching import TeacherReplay
from connectx_train.trainer import train
from tests.connectx_gym.test_files import random_weights
from tests.train.test_train_resume import arrays, outcomes, quiet, tiny
from tests.train.test_train_smoke import SMALL


def slots(n_envs: int = 6, seed: int = 0) -> BatchedOpponentSlots:
    return BatchedOpponentSlots(TrainConfig(n_envs=n_envs, seed=seed))


def play(env: BatchedOpponentSlots, steps: int, seed: int = 0) -> list[tuple[int, str]]:
    """``steps`` random legal moves on every board; the ``(board, label)`` of finished games."""
    rng = np.random.default_rng(seed)
    finished = []
    for _ in range(steps):
        masks = env.action_masks()
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        _, _, dones, infos = env.step(actions)
        for board in np.flatnonzero(dones):
            finished.append((int(board), infos[board]["opponent"]))
    return finished


def test_make_vec_env_batched_is_a_monitored_batch() -> None:
    env = make_vec_env(TrainConfig(n_envs=3, vec_env="batched"))
    assert isinstance(env, VecMonitor)
    assert isinstance(env.unwrapped, BatchedOpponentSlots)
    assert env.num_envs == 3
    env.reset()
    assert np.stack(env.env_method("action_masks")).shape == (3, 7)
    env.close()


def _stones_after_reset(config: TrainConfig) -> np.ndarray:
    """Stones on each training board right after the first reset of ``config``'s envs."""
    env = make_vec_env(config)
    observations = env.reset()
    env.close()
    return observations.reshape(config.n_envs, -1).sum(axis=1)


@pytest.mark.parametrize("vec_env", ["batched", "dummy"])
def test_opening_plies_reach_every_training_board(vec_env: str) -> None:
    stones = _stones_after_reset(TrainConfig(n_envs=64, vec_env=vec_env, opening_plies=4, seed=3))
    assert stones.max() >= 4  # games start after up to 4 random stones (and a reply)
    assert (stones == 0).any() or (stones == 1).any()
    unset = _stones_after_reset(TrainConfig(n_envs=64, vec_env=vec_env, seed=3))
    assert unset.max() >= 4  # the default: up to 4 stones too
    plain = _stones_after_reset(TrainConfig(n_envs=64, vec_env=vec_env, opening_plies=0, seed=3))
    assert plain.max() <= 1  # 0: the empty board


def test_bad_vec_env_is_refused() -> None:
    with pytest.raises(ValueError, match="batched"):
        TrainConfig(vec_env="threads").validate()


def test_queued_labels_mark_the_next_games_only() -> None:
    env = slots()
    env.reset()
    play(env, 3)  # games under way against random
    env.env_method("queue_opponent", "onestep", "onestep", indices=[1, 4])
    env.env_method("queue_opponent", "mix", "onestep~0.5", indices=[2])
    finished = play(env, 120)
    for board in range(env.num_envs):
        labels = [label for b, label in finished if b == board]
        expected = {1: "onestep", 4: "onestep", 2: "mix"}.get(board, "random")
        assert labels[0] == "random"  # the game in progress ends against its opponent
        assert set(labels[1:]) == {expected}, board
    assert env.env._policy_of[1] == env.env._policy_of[4]  # one policy, one batch call
    timing = collect_timing(env)
    assert set(timing["opponents"]) == {"onestep", "mix"}
    assert all(seconds > 0 and moves > 0 for seconds, moves in timing["opponents"].values())
    assert timing["env_seconds"] > timing["opponents"]["onestep"][0]
    env.close()


def test_queue_opponents_shares_each_snapshot(tmp_path: Path) -> None:
    snapshot = str(save_weights(random_weights(Geometry()), tmp_path / "snapshot.npz"))
    env = slots(n_envs=8)
    env.reset()
    queue_opponents(env, [("self", 1.0)], [snapshot], np.random.default_rng(0))
    play(env, 1)
    timed = [p for p in env.env._policies if isinstance(p, TimedBatchPolicy)]
    assert len(timed) == 1  # eight boards, one network, one forward pass per step
    assert isinstance(timed[0].policy, NumpyNetPolicy)
    finished = play(env, 80)
    for board in range(env.num_envs):
        labels = [label for b, label in finished if b == board]
        assert labels[0] in ("random", "self")  # the first game began before the queue
        assert set(labels[1:]) == {"self"}, board
    assert collect_timing(env)["opponents"]["self"][1] > 0
    env.close()


@pytest.mark.parametrize("vec_env", ["batched", "dummy"])
def test_same_seed_gives_identical_weights(tmp_path: Path, vec_env: str) -> None:
    first = train(tiny(tmp_path / "a", vec_env=vec_env), log=quiet)
    second = train(tiny(tmp_path / "b", vec_env=vec_env), log=quiet)
    assert arrays(tmp_path / "a" / "final.npz") == arrays(tmp_path / "b" / "final.npz")
    assert outcomes(first) == outcomes(second)
    assert first["curriculum"] == second["curriculum"]
    assert first["evaluations"] == second["evaluations"]
    assert "self" in first["timing"]["opponents"]  # self-play snapshots played
    other = train(tiny(tmp_path / "c", vec_env=vec_env, seed=6), log=quiet)
    assert arrays(tmp_path / "c" / "final.npz") != arrays(tmp_path / "a" / "final.npz")
    assert other["timesteps"] == first["timesteps"]


def connectx(*argv: str) -> subprocess.CompletedProcess:
    code = "import sys; from connectx_gym.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300
    )


def test_cli_run_and_resume_batched(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = connectx(
        "train", "--vec-env", "batched", "--timesteps", "512", "--out", str(out), *SMALL
    )
    assert done.returncode == 0, done.stderr
    for name in ("final.npz", "final.zip", "report.md", "report.json", "checkpoint.zip"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["timesteps"] >= 512
    assert json.loads((out / "config.json").read_text())["vec_env"] == "batched"
    again = connectx("train", "--resume", "--timesteps", "1024", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "report.json").read_text())["timesteps"] >= 1024


def test_a_run_holds_numpy_blas_to_one_thread_and_restores_torch_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, object] = {}
    inner = trainer.ppo

    def spy(*args: object) -> None:
        seen["torch"] = torch.get_num_threads()
        seen["blas"] = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
        inner(*args)

    monkeypatch.setattr(trainer, "ppo", spy)
    before = torch.get_num_threads()
    train(tiny(tmp_path / "run", torch_threads=2), log=quiet)
    assert seen["torch"] == 2
    assert seen["blas"] <= {1}  # numpy's BLAS (when threadpoolctl finds it) runs one thread
    assert torch.get_num_threads() == before


def test_convolution_weights_are_channels_last(tmp_path: Path) -> None:
    config = tiny(tmp_path / "run")
    env = make_vec_env(config)
    model = new_model(config, env, tmp_path)
    convs = [m for m in model.policy.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs
    for conv in convs:
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    adam = model.policy.optimizer.defaults
    assert adam["fused"] is True  # one fused step over all parameters
    assert adam["eps"] == 1e-5  # SB3's Adam setting, kept
    env.close()


def test_teacher_replay_counts_as_update_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay = TeacherReplay.replay
    pause = 0.3

    def slow_replay(self: TeacherReplay, policy: object) -> float:
        loss = replay(self, policy)
        time.sleep(pause)
        return loss

    monkeypatch.setattr(TeacherReplay, "replay", slow_replay)
    config = tiny(
        tmp_path / "run", teacher_positions=30, teacher_epochs=1, teacher_workers=1,
        rows=4, columns=5, inarow=3,  # the small board: no shipped book to teach beside the 30
    )  # fmt: skip
    timing = train(config, log=quiet)["timing"]
    rollouts = config.timesteps // (config.n_envs * config.n_steps)
    # (the rollouts' own seconds depend on the machine's load, so only this side is asserted)
    assert timing["update_seconds"] >= rollouts * pause


def test_a_busy_machine_gets_the_one_thread_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_setup.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(run_setup, "busy_cores", lambda: 1.8)
    hint = run_setup.busy_machine_hint(2)
    assert hint is not None
    assert "1.8 of 2 cores in use by other work" in hint
    assert "--torch-threads 1" in hint
    assert run_setup.busy_machine_hint(1) is None  # already one thread
    monkeypatch.setattr(run_setup.torch, "get_num_threads", lambda: 2)
    setup = run_setup.resolve_setup(TrainConfig(torch_threads=0))
    assert setup.torch_threads == 2  # 0: torch's default, here 2 threads
    assert run_setup.busy_machine_hint(setup.torch_threads) is not None
    monkeypatch.setattr(run_setup, "busy_cores", lambda: 0.3)
    assert run_setup.busy_machine_hint(2) is None  # quiet now, whatever the load average says
    # without /proc/stat (not Linux), the load average decides
    monkeypatch.setattr(run_setup, "busy_cores", lambda: None)
    monkeypatch.setattr(run_setup.os, "getloadavg", lambda: (3.2, 1.0, 1.0))
    assert "load average 3.2 on 2 cores" in (run_setup.busy_machine_hint(2) or "")
    monkeypatch.setattr(run_setup.os, "getloadavg", lambda: (0.3, 1.0, 1.0))
    assert run_setup.busy_machine_hint(2) is None


def test_busy_cores_reads_the_cpu_time_between_two_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = iter([(1000, 800), (1300, 900)])  # (all ticks, idle and I/O wait ticks)
    monkeypatch.setattr(run_setup, "cpu_times", lambda: next(samples))
    monkeypatch.setattr(run_setup.os, "cpu_count", lambda: 2)
    # 300 ticks passed, 100 of them idle: two thirds of 2 cores busy
    assert run_setup.busy_cores(0.0) == pytest.approx(4 / 3)

    def unreadable() -> tuple[int, int]:
        raise OSError("no /proc/stat")

    monkeypatch.setattr(run_setup, "cpu_times", unreadable)
    assert run_setup.busy_cores(0.0) is None


def test_cpu_times_reads_this_machine() -> None:
    if not Path("/proc/stat").is_file():
        pytest.skip("no /proc/stat")
    total, idle = run_setup.cpu_times()
    assert 0 <= idle <= total


def test_precision_is_validated_and_resolved() -> None:
    with pytest.raises(ValueError, match="precision must be one of auto, bf16, fp32"):
        TrainConfig(precision="fp16").validate()
    assert choose_precision("bf16").bf16
    assert not choose_precision("fp32").bf16
    assert choose_precision("auto").bf16 == bf16_native()


def test_bf16_features_follow_the_float32_ones_and_train() -> None:
    space = gym.spaces.Box(0, 1, (2, 6, 7), np.int8)
    torch.manual_seed(0)
    exact = ConnectXCNN(space, channels=8, blocks=1, features_dim=16)
    rounded = ConnectXCNN(space, channels=8, blocks=1, features_dim=16, bf16=True)
    rounded.load_state_dict(exact.state_dict())
    observations = torch.as_tensor(np.random.default_rng(0).random((64, 2, 6, 7)) < 0.3).to(
        torch.int8
    )
    want, got = exact(observations), rounded(observations)
    assert got.dtype == torch.float32
    assert got.shape == want.shape
    assert not torch.equal(got, want)  # the products really ran in bfloat16
    with torch.no_grad():  # passes without gradients (rollouts, predict) stay float32
        torch.testing.assert_close(rounded(observations), exact(observations))
    scale = want.detach().abs().max().item()
    torch.testing.assert_close(got, want, rtol=0, atol=0.03 * scale)
    got.square().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in rounded.parameters())


def test_head_reads_channels_last_activations_like_a_flatten() -> None:
    space = gym.spaces.Box(0, 1, (2, 5, 4), np.int8)
    torch.manual_seed(1)
    net = ConnectXCNN(space, channels=6, blocks=0, features_dim=10)
    x = torch.randn(3, 6, 5, 4)
    want = net.head(x.flatten(1))
    for layout in (torch.contiguous_format, torch.channels_last):
        got = net._head_channels_last(x.contiguous(memory_format=layout))
        torch.testing.assert_close(got, want)


def test_resume_takes_this_sessions_precision(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = train(tiny(out, precision="fp32"), log=quiet)
    assert first["bf16"] is False
    again = train(tiny(out, precision="bf16", resume=True, timesteps=768), log=quiet)
    assert again["bf16"] is True
    assert again["timesteps"] >= 768


def test_snapshot_files_are_read_once(tmp_path: Path) -> None:
    first = str(save_weights(random_weights(Geometry()), tmp_path / "first.npz"))
    second = str(save_weights(random_weights(Geometry()), tmp_path / "second.npz"))
    env = slots(n_envs=4)
    env.reset()
    cache: dict = {}
    rng = np.random.default_rng(0)
    queue_opponents(env, [("self", 1.0)], [first], rng, cache)
    assert set(cache) == {first}
    Path(first).unlink()  # read once: the next rollouts play it from memory
    queue_opponents(env, [("self", 1.0)], [first], rng, cache)
    play(env, 60)
    queue_opponents(env, [("self", 1.0)], [second], rng, cache)
    assert set(cache) == {second}  # snapshots that left the pool are dropped
    env.close()
