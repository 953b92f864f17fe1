"""Teaching the policy from the exact solver before PPO (``connectx train --teacher-positions N``).

A clearly named option, off by default in plain PPO runs: the run labels ``N`` positions with
:mod:`connectx_baselines.teacher_labels` (cached in ``out/teacher.npz``, so ``--resume`` does not
label them again), adds the shipped books that ``--teacher-book`` lists
(:mod:`connectx_train.config_types`) and trains the MaskablePPO policy on them by supervised
learning:

- the actor: ``-log`` of the probability it puts on the moves that keep the position's game value
  (any of them; the mistake rate of :mod:`connectx_baselines.perfect_play` counts the others);
- the critic: the game value (+1 win, 0 draw, -1 loss for the mover), the value PPO's returns
  estimate.

Each batch is mirrored left-right at random (the rules are symmetric). After each pass the
passes done so far are saved (``out/teacher_progress.pt``: weights, optimizer, schedule and the
shuffling generator), so a run killed while teaching goes on from its last pass when the same
command runs again, to the same network. PPO then goes on from the taught network, with its own
optimizer.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import math
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np
import torch

from connectx_baselines.teacher_book import BOOKS, load_book
from connectx_baselines.teacher_labels import CHUNK, ILLEGAL, TeacherSet, make_teacher_set
from connectx_gym.bitboard import Geometry
from connectx_gym.logs import warn
from connectx_train.budget import EtaLog, TimeLimitReachedError
from connectx_train.config import TrainConfig
from connectx_train.config_types import parse_teacher_books
from connectx_train.sb3_files import load_error_reason, write_torch_atomically

if TYPE_CHECKING:
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

__all__ = [
    "TEACHER_FILE",
    "TEACHER_PROGRESS_FILE",
    "TeacherTensors",
    "concatenate",
    "load_teacher",
    "policy_outputs",
    "pretrain_policy",
    "teacher_tensors",
    "write_torch_atomically",
]

logger = logging.getLogger(__name__)

#: the run's teacher positions, in its output directory (chunks in ``teacher/`` while labelling)
TEACHER_FILE = "teacher.npz"
#: the supervised passes done so far, in the run's output directory until PPO's first checkpoint
TEACHER_PROGRESS_FILE = "teacher_progress.pt"
#: Adam's rate of the trial batches that time a supervised pass (the passes take
#: ``--teacher-learning-rate``)
PRETRAIN_LEARNING_RATE = 2e-3
#: minibatch of the supervised passes and of the replay
TEACHER_BATCH = 256


@dataclass(frozen=True)
class TeacherTensors:
    """A teacher set as network inputs: observations ``[n, 2, rows, columns]`` (int8, the
    mover's stones first), legal ``masks``, ``good`` moves (bool) and position ``values``."""

    observations: torch.Tensor
    masks: torch.Tensor
    good: torch.Tensor
    values: torch.Tensor

    def __len__(self) -> int:
        return len(self.values)

    def to(self, device: torch.device) -> TeacherTensors:
        """These positions on ``device`` (``self`` where they are there already)."""
        if self.values.device == torch.device(device):
            return self
        return TeacherTensors(*(tensor.to(device) for tensor in dataclasses.astuple(self)))


def move_planes(geometry: Geometry, moves: np.ndarray) -> np.ndarray:
    """``Board.from_moves(...).to_planes()`` of every row of ``moves`` (int ``[n, cells]``, -1
    padded) at once: ``[n, 2, rows, columns]`` int8, the mover's stones first (row 0 at the
    top). The moves are taken as legal (labelled positions are)."""
    count, width = moves.shape
    rows, columns = geometry.rows, geometry.columns
    planes = np.zeros((count, 2, rows, columns), np.int8)
    for start in range(0, count, 8192):  # bounded memory: the one-hot is [n, cells, columns]
        part = moves[start : start + 8192]
        played = part >= 0
        column = np.where(played, part, 0).astype(np.intp)
        one_hot = (column[:, :, None] == np.arange(columns)) & played[:, :, None]
        heights = np.cumsum(one_hot, axis=1, dtype=np.int8)
        height = np.take_along_axis(heights, column[:, :, None], axis=2)[:, :, 0] - 1
        # stone k is the first player's when k is even; the mover is the first player when an
        # even number of stones was played
        mover = (np.arange(width)[None, :] % 2) == (played.sum(axis=1)[:, None] % 2)
        index, stone = np.nonzero(played)
        planes[
            start + index,
            np.where(mover[index, stone], 0, 1),
            rows - 1 - height[index, stone],
            column[index, stone],
        ] = 1
    return planes


def teacher_tensors(teacher: TeacherSet) -> TeacherTensors:
    """The observations and targets of every position of ``teacher``."""
    observations = move_planes(teacher.geometry, teacher.moves)
    legal = teacher.values != ILLEGAL
    values = np.where(legal, teacher.values, -2).astype(np.int64)
    best = values.max(axis=1)
    return TeacherTensors(
        torch.as_tensor(observations),
        torch.as_tensor(legal),
        torch.as_tensor(values == best[:, None]),
        torch.as_tensor(best, dtype=torch.float32),
    )


def policy_outputs(
    policy: MaskableActorCriticPolicy, observations: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Logits (not masked) and values of a :class:`connectx_train.networks.ConnectXPolicy`."""
    features = policy.extract_features(observations, policy.pi_features_extractor)
    latent_pi, latent_vf = policy.mlp_extractor(features)
    columns = int(cast(gym.spaces.Discrete, policy.action_space).n)
    logits = policy.action_net(latent_pi) + latent_pi[:, :columns]
    return logits, policy.value_net(latent_vf).squeeze(1)


def batch_losses(
    policy: MaskableActorCriticPolicy, data: TeacherTensors, index: torch.Tensor, mirror: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(actor loss, critic loss) of the positions ``index`` of ``data``, mirrored if asked
    (``index`` may be on the CPU while ``data`` is on a GPU)."""
    index = index.to(data.values.device)
    observations, masks, good = data.observations[index], data.masks[index], data.good[index]
    if mirror:
        observations, masks, good = observations.flip(-1), masks.flip(-1), good.flip(-1)
    logits, values = policy_outputs(policy, observations)
    logits = logits.masked_fill(~masks, -1e9)
    log_probs = torch.log_softmax(logits, dim=1)
    keep = torch.logsumexp(log_probs.masked_fill(~good, -1e9), dim=1)
    return -keep.mean(), torch.nn.functional.mse_loss(values, data.values[index])


def pretrain_policy(
    policy: MaskableActorCriticPolicy,
    data: TeacherTensors,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    log: Callable[[str], None] = logger.info,
    value_weight: float = 0.5,
    progress: Path | None = None,
    settings: dict[str, Any] | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> dict[str, float]:
    """Train ``policy`` on ``data`` for ``epochs`` passes (Adam, cosine-decayed rate); returns
    the last epoch's mean losses and ``earlier_seconds``, the wall seconds of passes made by
    earlier calls. The passes run on the policy's device (the positions go there, the shuffling
    stays on the CPU's generator).

    With ``progress`` (a file path), the state after each pass is saved there (atomically), and a
    call whose arguments, data and ``settings`` (anything else that shapes the network, as
    JSON) equal the saved ones goes on from the last saved pass instead of the first: the network
    it returns is the one an uninterrupted call returns. A progress file made otherwise, or one
    that cannot be read, is named in the log and the passes start over.

    The log gets a line each tenth of the passes or each 30 seconds with the time left.
    ``stop()`` is asked between batches: when true,
    :class:`connectx_train.budget.TimeLimitReachedError` is raised (the passes saved in ``progress``
    are kept, the one in progress is lost)."""
    if len(data) == 0:
        raise ValueError("no teacher positions to learn from")
    batch_size = min(batch_size, len(data))
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    steps = epochs * (len(data) // batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    key = json.dumps(
        [epochs, batch_size, learning_rate, seed, value_weight, _digest(data), settings or {}],
        sort_keys=True,
    )
    done, summary, earlier_seconds = 0, {}, 0.0
    if progress is not None and progress.is_file():
        saved = _read_progress(progress, key, log)
        fresh = copy.deepcopy(policy.state_dict()), copy.deepcopy(optimizer.state_dict())
        try:
            if saved is not None:
                policy.load_state_dict(saved["policy"])
                optimizer.load_state_dict(saved["optimizer"])
                schedule.load_state_dict(saved["schedule"])
                generator.set_state(saved["generator"])
                done, summary = int(saved["epoch"]), dict(saved["summary"])
                earlier_seconds = float(saved["seconds"])
                log(f"going on from teacher epoch {done}/{epochs} saved in {progress}")
        except (RuntimeError, ValueError, TypeError, KeyError, IndexError) as error:
            policy.load_state_dict(fresh[0])  # undo what was loaded before the damage showed
            optimizer.load_state_dict(fresh[1])
            generator.manual_seed(seed)
            schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
            done, summary, earlier_seconds = 0, {}, 0.0
            reason = load_error_reason(error)
            log(
                f"the teacher passes saved in {progress} are damaged ({reason}); "
                "teaching from the start"
            )
    started = time.perf_counter()
    per_pass = len(data) // batch_size
    eta = EtaLog(log, epochs * per_pass, done * per_pass)
    policy.set_training_mode(True)
    on_device = data.to(policy.device)
    for epoch in range(done, epochs):
        order = torch.randperm(len(data), generator=generator)
        flips = torch.rand(len(order) // batch_size + 1, generator=generator) < 0.5
        # summed where the losses are, read once per pass (not a GPU wait per minibatch)
        totals = torch.zeros(2, dtype=torch.float64, device=policy.device)
        batches = 0
        for start in range(0, len(order) - batch_size + 1, batch_size):
            if stop():
                policy.set_training_mode(False)
                raise TimeLimitReachedError(f"teaching stopped in pass {epoch + 1}/{epochs}")

            def pass_line(left: str, e: int = epoch, b: int = batches) -> str:
                return f"teacher pass {e + 1}/{epochs}: {b}/{per_pass} batches, {left}"

            eta.update(epoch * per_pass + batches, pass_line)
            index = order[start : start + batch_size]
            actor, critic = batch_losses(policy, on_device, index, bool(flips[batches]))
            optimizer.zero_grad()
            (actor + value_weight * critic).backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            totals += torch.stack([actor.detach(), critic.detach()]).double()
            batches += 1
        actor_loss, critic_loss = (float(mean) for mean in totals.cpu() / max(batches, 1))
        summary = {"epoch": epoch + 1, "actor_loss": actor_loss, "critic_loss": critic_loss}
        log(f"teacher epoch {epoch + 1}/{epochs}: actor {actor_loss:.4f}, critic {critic_loss:.4f}")
        if progress is not None:
            seconds = earlier_seconds + time.perf_counter() - started
            write_torch_atomically(
                progress,
                {
                    "key": key,
                    "epoch": epoch + 1,
                    "summary": summary,
                    "seconds": seconds,
                    "policy": policy.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "generator": generator.get_state(),
                },
            )
    policy.set_training_mode(False)
    return {**summary, "earlier_seconds": earlier_seconds}


def seconds_per_batch(
    policy: MaskableActorCriticPolicy, data: TeacherTensors, batch_size: int, batches: int = 3
) -> float:
    """Wall seconds of one supervised batch of ``policy`` on ``data``: the mean of ``batches``
    timed after a first, untimed one, made on a copy (``policy`` and every random stream are
    left as they were)."""
    trial = copy.deepcopy(policy)
    trial.set_training_mode(True)
    optimizer = torch.optim.Adam(trial.parameters(), lr=PRETRAIN_LEARNING_RATE)
    batch_size = min(batch_size, len(data))
    data = data.to(trial.device)  # the passes' positions live where the policy computes
    started = 0.0
    for step in range(batches + 1):
        if step == 1:
            started = time.perf_counter()
        index = torch.arange(step * batch_size, (step + 1) * batch_size) % len(data)
        actor, critic = batch_losses(trial, data, index, mirror=bool(step % 2))
        optimizer.zero_grad()
        (actor + 0.5 * critic).backward()
        optimizer.step()
    return (time.perf_counter() - started) / batches


def subset(data: TeacherTensors, count: int, seed: int) -> TeacherTensors:
    """``count`` positions of ``data`` drawn without replacement by ``seed`` (all when
    ``count >= len(data)``), in the order drawn."""
    if count >= len(data):
        return data
    index = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))[:count]
    return TeacherTensors(*(tensor[index] for tensor in dataclasses.astuple(data)))


def _digest(data: TeacherTensors) -> str:
    """A fingerprint of the positions and their labels (saved passes are for these only)."""
    digest = hashlib.blake2b(digest_size=16)
    for tensor in dataclasses.astuple(data):
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


#: what a progress file holds besides its key
_PROGRESS_FIELDS = ("epoch", "summary", "seconds", "policy", "optimizer", "schedule", "generator")


def _read_progress(path: Path, key: str, log: Callable[[str], None]) -> dict[str, Any] | None:
    """The passes saved in ``path`` when they were made with ``key``; otherwise ``None``, logged."""
    try:
        # onto the CPU: passes saved on a GPU go on on any device (load_state_dict moves them)
        saved = torch.load(path, weights_only=True, map_location="cpu")
        same = isinstance(saved, dict) and saved.get("key") == key
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        reason = load_error_reason(error)
        warn(
            log,
            f"cannot read the teacher passes saved in {path} ({reason}); teaching from the start",
        )
        return None
    missing = [name for name in _PROGRESS_FIELDS if same and name not in saved]
    if missing:
        warn(
            log,
            f"the teacher passes saved in {path} are damaged (no {', '.join(missing)}); "
            "teaching from the start",
        )
        return None
    if not same:
        warn(
            log,
            f"the teacher passes saved in {path} were made with other settings or positions; "
            "teaching from the start",
        )
        return None
    return saved


def concatenate(parts: list[TeacherTensors]) -> TeacherTensors:
    """The positions of every part, in order."""
    return TeacherTensors(
        *(
            torch.cat(tensors)
            for tensors in zip(*(dataclasses.astuple(p) for p in parts), strict=True)
        )
    )


def load_teacher(
    config: TrainConfig,
    out: Path,
    log: Callable[[str], None],
    *,
    fraction: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
) -> TeacherTensors:
    """The run's teacher positions as tensors: read from ``out/teacher.npz``, or labelled (with
    per-chunk files in ``out/teacher/``, so an interrupted labelling resumes; chunks the package
    ships, :mod:`connectx_baselines.teacher_cache`, are read instead) and saved there;
    then the shipped books that ``config.teacher_book`` lists (:mod:`connectx_train.config_types`),
    where they cover the board size.

    With ``fraction`` below 1 (a run sized to its steps, :mod:`connectx_train.budget`), that share
    of every part: the first :func:`own_positions` of the run's own and the first positions of each
    book. ``stop`` ends the labelling early (:class:`connectx_baselines.teacher_labels.
    LabellingStoppedError`; the chunks done are kept)."""
    path = out / TEACHER_FILE
    geometry = config.geometry
    if path.is_file():
        teacher = TeacherSet.load(path)
    else:
        count = own_positions(config.teacher_positions, fraction)
        shipped = config.teacher_labels == "shipped"
        how = (
            "read from the shipped labels where they hold them, the rest labelled by the exact "
            "solver (--teacher-labels shipped)"
            if shipped
            else "all labelled by the exact solver (--teacher-labels label)"
        )
        log(f"teacher set: {count} positions, {how}")
        teacher = make_teacher_set(
            geometry,
            count,
            teacher_seed(config),
            workers=config.labelling_workers(),
            cache=out / "teacher",
            shipped=shipped,
            log=log,
            stop=stop,
            ray=config.ray,
        )
        teacher.save(path)
    parts = [teacher_tensors(teacher)]
    for use in parse_teacher_books(config.teacher_book):
        whole = load_book(geometry, BOOKS[use.name].file)
        wanted = use.first or 0
        if whole is not None and fraction < 1:
            held = min(wanted or len(whole), len(whole))
            wanted = max(1, math.ceil(fraction * held))
        book = _book_part(use.name, whole, geometry, use.copies, wanted, log)
        parts += [teacher_tensors(book)] * use.copies if book is not None else []
    return concatenate(parts) if len(parts) > 1 else parts[0]


def teacher_seed(config: TrainConfig) -> int:
    """The seed of the games the run's own teacher positions come from."""
    return config.seed if config.teacher_seed is None else config.teacher_seed


def own_positions(positions: int, fraction: float) -> int:
    """The run's own teacher positions at ``fraction`` of ``positions``: whole chunks of
    :data:`~connectx_baselines.teacher_labels.CHUNK` (those the shipped labels hold), at least
    one."""
    if fraction >= 1:
        return positions
    return min(positions, max(CHUNK, CHUNK * math.ceil(fraction * positions / CHUNK)))


def book_positions(config: TrainConfig) -> int:
    """Positions the books add to the run's own (copies included), on the run's board."""
    total = 0
    for use in parse_teacher_books(config.teacher_book):
        book = load_book(config.geometry, BOOKS[use.name].file)
        if book is not None:
            total += use.copies * min(use.first or len(book), len(book))
    return total


def _book_part(
    name: str,
    book: TeacherSet | None,
    geometry: Geometry,
    copies: int,
    wanted: int,
    log: Callable[[str], None],
) -> TeacherSet | None:
    """The first ``wanted`` positions of ``book`` (all when 0), saying in the log what is added."""
    if book is None:
        warn(log, f"no {name} book for {geometry}: teaching without it")
        return None
    settings = book.meta["settings"]
    low, high = settings["min_ply"], settings["max_ply"]
    stones = f"{low}-{high} stones" if high is not None else f"{low} stones or more"
    held = len(book)
    part, note = f"{held}", ""
    if 0 < wanted < held:
        book = dataclasses.replace(book, moves=book.moves[:wanted], values=book.values[:wanted])
        part = f"{wanted} of its {held}"
    elif wanted > held:
        note = f" (it holds fewer than the {wanted} asked for)"
    times = "once" if copies == 1 else f"{copies} times"
    log(f"adding the {name} book ({part} positions of {stones}) {times}{note}")
    return book
