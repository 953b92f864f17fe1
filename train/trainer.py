"""The ``connectx train`` loop: MaskablePPO on ``ConnectX-v0`` with a curriculum and self-play.

One run lives in one output directory::

    config.json              the settings (``--resume`` reads them back)
    checkpoint.zip, state.json   the last checkpoint: SB3 model + curriculum/self-play/eval state
    snapshots/step_*.npz     frozen weights of the agent, the self-play pool
    tb/                      TensorBoard logs (one run, continued by ``--resume``)
    final.zip, final.npz     the trained model (SB3, and weights only: share the ``.npz``)
    report.md, report.json   panel results with 95% intervals, timings, curriculum history
    learning_curves.png      panel scores and training win rate against steps

Each env plays, for one rollout at a time, an opponent drawn from the current mixture (the stage's
specs, a review share of earlier stages and a self-play share of snapshots); the change takes effect
at the env's next reset, so every episode is played against one opponent, whose label the episode's
``info["opponent"]`` carries. Files are written atomically (a temporary file, then
``os.replace``), so a crash or Ctrl-C never leaves half a checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.env import ConnectXEnv
from connectx_gym.files import NumpyNetPolicy, WeightsFile, load_weights, save_weights
from connectx_gym.match import play_match
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy
from train.config import TrainConfig, parse_mixture
from train.export import GEOMETRY_ATTRIBUTE
from train.networks import ConnectXCNN, ConnectXPolicy, numpy_layers

__all__ = [
    "Curriculum",
    "OpponentSlot",
    "RunInterruptedError",
    "TrainingCallback",
    "evaluate_panel",
    "make_vec_env",
    "model_weights",
    "train",
]

SELF_LABEL = "self"


class RunInterruptedError(Exception):
    """Training stopped by Ctrl-C after saving a checkpoint (``--resume`` goes on from it)."""

    def __init__(self, out: Path, timesteps: int) -> None:
        super().__init__(
            f"interrupted at step {timesteps}: checkpoint saved in {out}; "
            f"continue with: connectx train --resume --out {out}"
        )
        self.out = out
        self.timesteps = timesteps


# -- the env side -----------------------------------------------------------------------------
class TimedPolicy(Policy):
    """Delegates to ``policy`` and adds its thinking time and move count to ``ledger[label]``."""

    def __init__(self, policy: Policy, label: str, ledger: dict[str, list[float]]) -> None:
        super().__init__()
        self.policy, self.label, self.ledger = policy, label, ledger
        self.name = getattr(policy, "name", label)

    def act(self, board: Board, rng: np.random.Generator) -> int:
        started = time.perf_counter()
        column = self.policy.act(board, rng)
        entry = self.ledger.setdefault(self.label, [0.0, 0])
        entry[0] += time.perf_counter() - started
        entry[1] += 1
        return column

    def reset(self) -> None:
        self.policy.reset()


class OpponentSlot(gym.Wrapper):
    """Lets the trainer queue the opponent of the next episode, labels finished episodes with
    ``info["opponent"]`` and times the opponent (see :meth:`timing`)."""

    def __init__(self, env: gym.Env, label: str = "random") -> None:
        super().__init__(env)
        self.label = label
        self._pending: tuple[str, Any] | None = (label, label)
        self._ledger: dict[str, list[float]] = {}
        self._env_seconds = 0.0

    def queue_opponent(self, label: str, opponent: str | Policy) -> None:
        """Play ``opponent`` (a spec or policy), reported as ``label``, from the next reset on."""
        self._pending = (label, opponent)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        started = time.perf_counter()
        if self._pending is not None:
            self.label, opponent = self._pending
            self._pending = None
            timed = TimedPolicy(make_policy(opponent), self.label, self._ledger)
            kwargs["options"] = {**(kwargs.get("options") or {}), "opponent": timed}
        result = self.env.reset(**kwargs)
        self._env_seconds += time.perf_counter() - started
        return result

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        started = time.perf_counter()
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info["opponent"] = self.label
        self._env_seconds += time.perf_counter() - started
        return observation, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """The legal columns (for MaskablePPO)."""
        return self.env.unwrapped.action_masks()

    def timing(self) -> dict[str, Any]:
        """Seconds spent in the env (opponent included) and, per opponent label, the opponent's
        seconds and moves."""
        return {"env_seconds": self._env_seconds, "opponents": dict(self._ledger)}


def _env_factory(config: TrainConfig, index: int) -> Callable[[], gym.Env]:
    def make() -> gym.Env:
        env = ConnectXEnv(config.rows, config.columns, config.inarow, opponent="random")
        env.reset(seed=config.seed * 1000 + index)
        return Monitor(OpponentSlot(env))

    return make


def make_vec_env(config: TrainConfig) -> VecEnv:
    """``config.n_envs`` envs in one process (``dummy``) or one each (``subproc``; ``auto`` falls
    back to ``dummy`` when subprocesses cannot start)."""
    factories = [_env_factory(config, i) for i in range(config.n_envs)]
    if config.vec_env == "dummy":
        return DummyVecEnv(factories)
    # Workers ignore Ctrl-C (the disposition survives exec), so the main process can save.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return SubprocVecEnv(factories)
    except Exception:
        if config.vec_env == "subproc":
            raise
        return DummyVecEnv(factories)
    finally:
        signal.signal(signal.SIGINT, previous)


# -- curriculum ---------------------------------------------------------------------------------
@dataclass
class Curriculum:
    """Opponent stages, easiest first; moves on when the win rate over the last ``window``
    episodes against the current stage reaches ``threshold``."""

    stages: list[list[tuple[str, float]]]
    threshold: float
    window: int
    review_weight: float = 0.0
    selfplay_weight: float = 0.0
    selfplay_from_stage: int = 0
    stage: int = 0
    recent: deque = field(default_factory=deque)
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: TrainConfig) -> Curriculum:
        """The curriculum of ``config`` (one fixed stage when ``--opponent`` is given)."""
        mixtures = config.opponent or config.curriculum
        stages = (
            [parse_mixture(m) for m in mixtures]
            if not config.opponent
            else [[item for m in config.opponent for item in parse_mixture(m)]]
        )
        return cls(
            stages,
            config.advance_threshold,
            config.advance_window,
            config.review_weight,
            config.selfplay_weight,
            config.selfplay_from_stage,
            history=[{"stage": 0, "timestep": 0, "opponents": _labels(stages[0])}],
        )

    @property
    def current_labels(self) -> list[str]:
        """Specs of the current stage."""
        return _labels(self.stages[self.stage])

    def mixture(self, selfplay_available: bool) -> list[tuple[str, float]]:
        """``(label, probability)`` of each opponent for the next rollout (label ``"self"``:
        a snapshot of the agent)."""
        review = self.review_weight if self.stage > 0 else 0.0
        selfplay = (
            self.selfplay_weight
            if selfplay_available and self.stage >= self.selfplay_from_stage
            else 0.0
        )
        main = self.stages[self.stage]
        total = sum(w for _, w in main)
        items = [(spec, (1 - review - selfplay) * w / total) for spec, w in main]
        earlier = [spec for stage in self.stages[: self.stage] for spec, _ in stage]
        items += [(spec, review / len(earlier)) for spec in earlier] if review else []
        items += [(SELF_LABEL, selfplay)] if selfplay else []
        return items

    def record(self, label: str, won: bool) -> None:
        """Count one finished episode against ``label``."""
        if label in self.current_labels:
            self.recent.append(1.0 if won else 0.0)
            while len(self.recent) > self.window:
                self.recent.popleft()

    @property
    def win_rate(self) -> float:
        """Win rate over the recent episodes against the current stage (NaN before any)."""
        return float(np.mean(self.recent)) if self.recent else math.nan

    def maybe_advance(self, timestep: int) -> bool:
        """Move to the next stage if the window is full and its win rate passes the threshold."""
        if self.stage + 1 >= len(self.stages) or len(self.recent) < self.window:
            return False
        if self.win_rate < self.threshold:
            return False
        self.history[-1]["win_rate_at_exit"] = self.win_rate
        self.stage += 1
        self.recent.clear()
        self.history.append(
            {"stage": self.stage, "timestep": timestep, "opponents": self.current_labels}
        )
        return True

    def state(self) -> dict[str, Any]:
        """JSON-ready state (for checkpoints)."""
        return {"stage": self.stage, "recent": list(self.recent), "history": self.history}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`."""
        self.stage = min(int(state["stage"]), len(self.stages) - 1)
        self.recent = deque(state["recent"])
        self.history = list(state["history"])


def _labels(stage: list[tuple[str, float]]) -> list[str]:
    return [spec for spec, _ in stage]


# -- evaluation ---------------------------------------------------------------------------------
def model_weights(model: MaskablePPO, geometry: Geometry) -> WeightsFile:
    """The policy of ``model`` in the weights-only format (numpy inference)."""
    layers, params = numpy_layers(model.policy)
    return WeightsFile(geometry, layers, params)


def evaluate_panel(
    weights: WeightsFile, panel: tuple[str, ...], games: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Deterministic play of ``weights`` against every panel spec, seats alternating."""
    agent = NumpyNetPolicy(weights, deterministic=True, name="agent")
    g = weights.geometry
    results = {}
    for spec in panel:
        match = play_match(agent, spec, games, seed, g.rows, g.columns, g.inarow)
        results[spec] = match.to_dict()
    return results


class LinearSchedule:
    """Learning rate decaying linearly from ``start`` to ``end`` (picklable, for SB3)."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end

    def __call__(self, progress_remaining: float) -> float:
        return self.end + (self.start - self.end) * progress_remaining


# -- the callback -------------------------------------------------------------------------------
class TrainingCallback(BaseCallback):
    """Assigns opponents each rollout, keeps the curriculum, the self-play pool, periodic panel
    evaluations and checkpoints, and stops at the time limit."""

    def __init__(self, config: TrainConfig, out: Path, curriculum: Curriculum) -> None:
        super().__init__()
        self.config = config
        self.out = out
        self.curriculum = curriculum
        self.geometry = Geometry(config.rows, config.columns, config.inarow)
        self.rng = np.random.default_rng([config.seed, 7])
        self.snapshots: list[str] = []
        self.evaluations: list[dict[str, Any]] = []
        self.train_curve: list[dict[str, Any]] = []
        self.outcomes: dict[str, deque] = {}
        self.next_eval = config.eval_every
        self.next_checkpoint = config.checkpoint_every
        self.next_snapshot = config.snapshot_every
        self.wall_seconds = 0.0
        self.eval_seconds = 0.0
        self.session_start = time.perf_counter()
        self.session_steps_start = 0
        self.stopped_by_time = False

    # state kept in checkpoints
    def state(self) -> dict[str, Any]:
        """JSON-ready state of the run besides the model."""
        return {
            "num_timesteps": int(self.num_timesteps),
            "curriculum": self.curriculum.state(),
            "snapshots": self.snapshots,
            "evaluations": self.evaluations,
            "train_curve": self.train_curve,
            "next": [self.next_eval, self.next_checkpoint, self.next_snapshot],
            "wall_seconds": self.elapsed(),
            "eval_seconds": self.eval_seconds,
            "rng": self.rng.bit_generator.state,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` (on ``--resume``)."""
        self.curriculum.load_state(state["curriculum"])
        self.snapshots = [s for s in state["snapshots"] if Path(s).is_file()]
        self.evaluations = state["evaluations"]
        self.train_curve = state["train_curve"]
        self.next_eval, self.next_checkpoint, self.next_snapshot = state["next"]
        self.wall_seconds = state["wall_seconds"]
        self.eval_seconds = state["eval_seconds"]
        self.rng.bit_generator.state = state["rng"]

    def elapsed(self) -> float:
        """Wall seconds of the run so far, over all sessions."""
        return self.wall_seconds + time.perf_counter() - self.session_start

    # SB3 hooks
    def _on_training_start(self) -> None:
        self.session_start = time.perf_counter()
        self.session_steps_start = self.num_timesteps
        self.assign_opponents()

    def _on_rollout_start(self) -> None:
        self.assign_opponents()

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done and "opponent" in info:
                label = info["opponent"]
                won = info.get("winner") == info.get("agent_mark")
                self.curriculum.record(label, won)
                self.outcomes.setdefault(label, deque(maxlen=200)).append(float(won))
        if self.curriculum.maybe_advance(self.num_timesteps) and not self.config.progress_bar:
            print(f"step {self.num_timesteps}: curriculum -> {self.curriculum.current_labels}")
        steps = self.num_timesteps
        if steps >= self.next_snapshot:
            self.next_snapshot += self.config.snapshot_every
            self.add_snapshot()
        if self.config.eval_every and steps >= self.next_eval:
            self.next_eval += self.config.eval_every
            self.evaluate()
        if steps >= self.next_checkpoint:
            self.next_checkpoint += self.config.checkpoint_every
            self.save_checkpoint()
        session = time.perf_counter() - self.session_start
        if self.config.max_minutes and session > 60 * self.config.max_minutes:
            self.stopped_by_time = True
            return False
        return True

    def _on_rollout_end(self) -> None:
        self.logger.record("curriculum/stage", self.curriculum.stage)
        if not math.isnan(self.curriculum.win_rate):
            self.logger.record("curriculum/win_rate", self.curriculum.win_rate)
        point: dict[str, Any] = {
            "timestep": int(self.num_timesteps),
            "stage": self.curriculum.stage,
        }
        for label, outcomes in self.outcomes.items():
            if outcomes:
                rate = float(np.mean(outcomes))
                self.logger.record(f"win_rate/{label}", rate)
                point[label] = rate
        self.train_curve.append(point)
        session_steps = self.num_timesteps - self.session_steps_start
        session_time = time.perf_counter() - self.session_start
        self.logger.record("time/steps_per_second", session_steps / max(session_time, 1e-9))

    # work
    def assign_opponents(self) -> None:
        """Draw each env's opponent for the next rollout from the curriculum's mixture."""
        mixture = self.curriculum.mixture(selfplay_available=bool(self.snapshots))
        labels = [label for label, _ in mixture]
        probabilities = np.array([p for _, p in mixture])
        probabilities /= probabilities.sum()
        env = self.training_env
        for index in range(env.num_envs):
            label = labels[self.rng.choice(len(labels), p=probabilities)]
            opponent: str | Policy = label
            if label == SELF_LABEL:
                snapshot = self.snapshots[self.rng.integers(len(self.snapshots))]
                opponent = NumpyNetPolicy(load_weights(snapshot), deterministic=False, name="self")
            env.env_method("queue_opponent", label, opponent, indices=[index])

    def add_snapshot(self) -> None:
        """Freeze the current weights into the self-play pool."""
        directory = self.out.resolve() / "snapshots"
        directory.mkdir(exist_ok=True)
        path = directory / f"step_{self.num_timesteps:09d}.npz"
        save_weights(model_weights(self.model, self.geometry), path)
        self.snapshots = [*self.snapshots, str(path)][-self.config.pool_size :]

    def evaluate(self, games: int | None = None) -> dict[str, dict[str, Any]]:
        """Play the panel and log the scores."""
        started = time.perf_counter()
        weights = model_weights(self.model, self.geometry)
        results = evaluate_panel(
            weights, self.config.panel, games or self.config.eval_games, self.config.seed + 1
        )
        for spec, result in results.items():
            self.logger.record(f"eval/{spec}", result["score"])
        self.evaluations.append(
            {
                "timestep": int(self.num_timesteps),
                "games": games or self.config.eval_games,
                "scores": {spec: r["score"] for spec, r in results.items()},
            }
        )
        self.eval_seconds += time.perf_counter() - started
        return results

    def save_checkpoint(self) -> None:
        """Write the model and the run's state atomically."""
        save_model(self.model, self.out / "checkpoint.zip")
        write_json(self.out / "state.json", self.state())


def save_model(model: MaskablePPO, path: Path) -> None:
    """``model.save`` to a temporary file, then ``os.replace`` onto ``path``."""
    temporary = path.with_name(path.stem + ".tmp.zip")
    model.save(temporary)
    os.replace(temporary, path)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON atomically."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, default=float))
    os.replace(temporary, path)


# -- the run ------------------------------------------------------------------------------------
def _new_model(config: TrainConfig, env: VecEnv, out: Path) -> MaskablePPO:
    policy_kwargs = {
        "features_extractor_class": ConnectXCNN,
        "features_extractor_kwargs": {
            "channels": config.channels,
            "blocks": config.blocks,
            "features_dim": config.features_dim,
        },
        "net_arch": {"pi": [], "vf": list(config.vf_layers)},
        "activation_fn": torch.nn.ReLU,
    }
    model = MaskablePPO(
        ConnectXPolicy,
        env,
        learning_rate=LinearSchedule(config.learning_rate, config.final_learning_rate),
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef,
        vf_coef=config.vf_coef,
        max_grad_norm=config.max_grad_norm,
        policy_kwargs=policy_kwargs,
        tensorboard_log=str(out / "tb"),
        seed=config.seed,
        device="cpu",
        verbose=0,
    )
    # Saved in the model's zip: the Kaggle export reads the board size back from it.
    setattr(model, GEOMETRY_ATTRIBUTE, [config.rows, config.columns, config.inarow])
    return model


def prepare_out(config: TrainConfig) -> Path:
    """Create (or, with ``resume``, check) the output directory."""
    out = Path(config.out)
    if config.resume:
        if not (out / "checkpoint.zip").is_file() or not (out / "state.json").is_file():
            raise FileNotFoundError(f"nothing to resume: {out} has no checkpoint")
    elif (out / "checkpoint.zip").exists() or (out / "final.zip").exists():
        raise FileExistsError(
            f"{out} already holds a run: continue it with --resume or choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def train(config: TrainConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or, with ``config.resume``, continue) a training run; returns the final report.

    Raises :class:`RunInterruptedError` after saving a checkpoint when interrupted by Ctrl-C.
    """
    config.validate()
    for spec in {s for m in (*config.opponent, *config.curriculum) for s, _ in parse_mixture(m)}:
        make_policy(spec)  # unknown names and bad parameters fail here, not in a worker
    for spec in config.panel:
        make_policy(spec)
    out = prepare_out(config)
    if not config.resume:
        config.save(out / "config.json")
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    set_random_seed(config.seed)
    env = make_vec_env(config)
    curriculum = Curriculum.from_config(config)
    callback = TrainingCallback(config, out, curriculum)
    if config.resume:
        model = MaskablePPO.load(out / "checkpoint.zip", env=env, device="cpu")
        model.tensorboard_log = str(out / "tb")
        callback.load_state(json.loads((out / "state.json").read_text()))
        log(f"resuming {out} at step {model.num_timesteps} (stage {curriculum.stage})")
    else:
        model = _new_model(config, env, out)
    remaining = config.timesteps - model.num_timesteps
    try:
        if remaining > 0:
            model.learn(
                remaining,
                callback=callback,
                reset_num_timesteps=not config.resume,
                tb_log_name="ppo",
                progress_bar=config.progress_bar,
            )
    except KeyboardInterrupt:
        callback.save_checkpoint()
        _close(env)
        raise RunInterruptedError(out, int(model.num_timesteps)) from None
    callback.save_checkpoint()
    timing = _collect_timing(env)
    _close(env)
    return finish(config, out, model, callback, timing, log)


def _close(env: VecEnv) -> None:
    with contextlib.suppress(EOFError, BrokenPipeError, OSError):
        env.close()


def _collect_timing(env: VecEnv) -> dict[str, Any]:
    opponents: dict[str, list[float]] = {}
    env_seconds = 0.0
    for timing in env.env_method("timing"):
        env_seconds += timing["env_seconds"]
        for label, (seconds, moves) in timing["opponents"].items():
            entry = opponents.setdefault(label, [0.0, 0])
            entry[0] += seconds
            entry[1] += moves
    return {"env_seconds": env_seconds, "opponents": opponents}


def finish(
    config: TrainConfig,
    out: Path,
    model: MaskablePPO,
    callback: TrainingCallback,
    timing: dict[str, Any],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Save the final model, play the final panel and write the report and the plot."""
    from train.report import write_report

    geometry = Geometry(config.rows, config.columns, config.inarow)
    save_model(model, out / "final.zip")
    weights = model_weights(model, geometry)
    save_weights(weights, out / "final.npz")
    wall = callback.elapsed()
    session_wall = time.perf_counter() - callback.session_start
    log(f"trained {model.num_timesteps} steps in {wall / 60:.1f} min; playing the final panel")
    started = time.perf_counter()
    results = evaluate_panel(weights, config.panel, config.final_games, config.seed + 2)
    final_eval_seconds = time.perf_counter() - started
    training_seconds = wall - callback.eval_seconds
    report = {
        "config": config.to_json(),
        "timesteps": int(model.num_timesteps),
        "stopped_by_time_limit": callback.stopped_by_time,
        "wall_seconds": wall,
        "training_seconds": training_seconds,
        "periodic_eval_seconds": callback.eval_seconds,
        "final_eval_seconds": final_eval_seconds,
        "steps_per_second": model.num_timesteps / max(training_seconds, 1e-9),
        "curriculum": callback.curriculum.history,
        "final_stage": callback.curriculum.stage,
        "panel": results,
        "evaluations": callback.evaluations,
        "train_curve": callback.train_curve,
        "timing": _timing_summary(
            timing, session_wall, int(model.num_timesteps - callback.session_steps_start)
        ),
    }
    write_report(report, out)
    log(f"report: {out / 'report.md'}")
    return report


def _timing_summary(timing: dict[str, Any], wall: float, timesteps: int) -> dict[str, Any]:
    """Share of the wall time of the last session (``timesteps`` steps in ``wall`` seconds) spent
    inside opponents, overall and projected per opponent as if every step had been played
    against it (one opponent move per agent step)."""
    opponents = {}
    total = 0.0
    for label, (seconds, moves) in timing["opponents"].items():
        total += seconds
        per_move = seconds / max(moves, 1)
        opponents[label] = {
            "seconds": seconds,
            "moves": int(moves),
            "ms_per_move": 1000 * per_move,
            "projected_share_of_wall": per_move * timesteps / max(wall, 1e-9),
        }
    return {
        "env_seconds": timing["env_seconds"],
        "opponent_seconds": total,
        "opponent_share_of_wall": total / max(wall, 1e-9),
        "opponents": opponents,
        "note": "timings cover the last session of the run (since the last --resume)",
    }
