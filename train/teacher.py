"""Teaching the policy from the exact solver before PPO (``connectx train --teacher-positions N``).

A clearly named option, off by default in plain PPO runs: the run labels ``N`` positions with
:mod:`baselines.teacher_labels` (cached in ``out/teacher.npz``, so ``--resume`` does not label
them again), adds ``--teacher-book`` copies of the shipped opening book, ``--teacher-early-book``
copies of the early book and ``--teacher-middle-book`` copies of the middle book
(:mod:`baselines.teacher_book`) and trains the MaskablePPO policy on them by supervised learning:

- the actor: ``-log`` of the probability it puts on the moves that keep the position's game value
  (any of them; the mistake rate of :mod:`baselines.perfect_play` counts the others);
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
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback

from baselines.teacher_book import BOOKS, load_book
from baselines.teacher_labels import ILLEGAL, TeacherSet, make_teacher_set
from connectx_gym.bitboard import Geometry
from train.config import TrainConfig

__all__ = [
    "TEACHER_FILE",
    "TEACHER_PROGRESS_FILE",
    "TeacherReplayCallback",
    "TeacherTensors",
    "concatenate",
    "load_teacher",
    "policy_outputs",
    "pretrain_policy",
    "teacher_tensors",
    "write_torch_atomically",
]

#: the run's teacher positions, in its output directory (chunks in ``teacher/`` while labelling)
TEACHER_FILE = "teacher.npz"
#: the supervised passes done so far, in the run's output directory until PPO's first checkpoint
TEACHER_PROGRESS_FILE = "teacher_progress.pt"
#: Adam's rate for the supervised passes before PPO (cosine-decayed to zero)
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


def teacher_tensors(teacher: TeacherSet) -> TeacherTensors:
    """The observations and targets of every position of ``teacher``."""
    observations = np.stack([board.to_planes() for board in teacher.boards()])
    legal = teacher.values != ILLEGAL
    values = np.where(legal, teacher.values, -2).astype(np.int64)
    best = values.max(axis=1)
    return TeacherTensors(
        torch.as_tensor(observations),
        torch.as_tensor(legal),
        torch.as_tensor(values == best[:, None]),
        torch.as_tensor(best, dtype=torch.float32),
    )


def policy_outputs(policy: torch.nn.Module, observations: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Logits (not masked) and values of a :class:`train.networks.ConnectXPolicy`."""
    features = policy.extract_features(observations, policy.pi_features_extractor)
    latent_pi, latent_vf = policy.mlp_extractor(features)
    columns = int(policy.action_space.n)
    logits = policy.action_net(latent_pi) + latent_pi[:, :columns]
    return logits, policy.value_net(latent_vf).squeeze(1)


def batch_losses(
    policy: torch.nn.Module, data: TeacherTensors, index: torch.Tensor, mirror: bool
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
    policy: torch.nn.Module,
    data: TeacherTensors,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    log: Callable[[str], None] = print,
    value_weight: float = 0.5,
    progress: Path | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Train ``policy`` on ``data`` for ``epochs`` passes (Adam, cosine-decayed rate); returns
    the last epoch's mean losses and ``earlier_seconds``, the wall seconds of passes made by
    earlier calls. The passes run on the policy's device (the positions go there, the shuffling
    stays on the CPU's generator).

    With ``progress`` (a file path), the state after each pass is saved there (atomically), and a
    call whose arguments, data and ``settings`` (anything else that shapes the network, as
    JSON) equal the saved ones goes on from the last saved pass instead of the first: the network
    it returns is the one an uninterrupted call returns. A progress file made otherwise, or one
    that cannot be read, is named in the log and the passes start over."""
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
        if saved is not None:
            policy.load_state_dict(saved["policy"])
            optimizer.load_state_dict(saved["optimizer"])
            schedule.load_state_dict(saved["schedule"])
            generator.set_state(saved["generator"])
            done, summary, earlier_seconds = saved["epoch"], saved["summary"], saved["seconds"]
            log(f"going on from teacher epoch {done}/{epochs} saved in {progress}")
    started = time.perf_counter()
    policy.set_training_mode(True)
    on_device = data.to(policy.device)
    for epoch in range(done, epochs):
        order = torch.randperm(len(data), generator=generator)
        flips = torch.rand(len(order) // batch_size + 1, generator=generator) < 0.5
        # summed where the losses are, read once per pass (not a GPU wait per minibatch)
        totals = torch.zeros(2, dtype=torch.float64, device=policy.device)
        batches = 0
        for start in range(0, len(order) - batch_size + 1, batch_size):
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


def _digest(data: TeacherTensors) -> str:
    """A fingerprint of the positions and their labels (saved passes are for these only)."""
    digest = hashlib.blake2b(digest_size=16)
    for tensor in dataclasses.astuple(data):
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def write_torch_atomically(path: Path, saved: dict[str, Any]) -> None:
    """Save ``saved`` to ``path`` through a temporary file, so no reader sees half of it (the
    supervised passes here, a checkpoint's extras in :mod:`train.resume_extras`)."""
    temporary = path.with_name(path.name + ".tmp.pt")  # as the run's other files are written
    torch.save(saved, temporary)
    os.replace(temporary, path)


def _read_progress(path: Path, key: str, log: Callable[[str], None]) -> dict[str, Any] | None:
    """The passes saved in ``path`` when they were made with ``key``; otherwise ``None``, logged."""
    try:
        # onto the CPU: passes saved on a GPU go on on any device (load_state_dict moves them)
        saved = torch.load(path, weights_only=True, map_location="cpu")
        same = isinstance(saved, dict) and saved.get("key") == key
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        log(f"cannot read the teacher passes saved in {path} ({reason}); teaching from the start")
        return None
    if not same:
        log(
            f"the teacher passes saved in {path} were made with other settings or positions; "
            "teaching from the start"
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


def load_teacher(config: TrainConfig, out: Path, log: Callable[[str], None]) -> TeacherTensors:
    """The run's teacher positions as tensors: read from ``out/teacher.npz``, or labelled (with
    per-chunk files in ``out/teacher/``, so an interrupted labelling resumes; chunks the package
    ships, :mod:`baselines.teacher_cache`, are read instead) and saved there;
    then ``config.teacher_book`` copies of the shipped opening book's first
    ``config.teacher_book_positions`` positions (all when 0 or when it holds fewer) and
    ``config.teacher_early_book`` copies of the early book's first
    ``config.teacher_early_book_positions`` and ``config.teacher_middle_book`` copies of the
    middle book's first ``config.teacher_middle_book_positions`` (:mod:`baselines.teacher_book`),
    where they cover the board size."""
    path = out / TEACHER_FILE
    geometry = config.geometry
    if path.is_file():
        teacher = TeacherSet.load(path)
    else:
        log(
            f"teacher set: {config.teacher_positions} positions, labelled by the exact solver or "
            "read from the shipped labels where they hold them"
        )
        teacher = make_teacher_set(
            geometry,
            config.teacher_positions,
            config.seed if config.teacher_seed is None else config.teacher_seed,
            workers=config.teacher_workers,
            cache=out / "teacher",
            log=log,
        )
        teacher.save(path)
    parts = [teacher_tensors(teacher)]
    books = (
        ("opening", config.teacher_book, config.teacher_book_positions),
        ("early", config.teacher_early_book, config.teacher_early_book_positions),
        ("middle", config.teacher_middle_book, config.teacher_middle_book_positions),
    )
    for name, copies, wanted in books:
        if copies:
            shipped = load_book(geometry, BOOKS[name].file)
            book = _book_part(name, shipped, geometry, copies, wanted, log)
            parts += [teacher_tensors(book)] * copies if book is not None else []
    return concatenate(parts) if len(parts) > 1 else parts[0]


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
        log(f"no {name} book for {geometry}: teaching without it")
        return None
    settings = book.meta["settings"]
    stones = f"{settings['min_ply']}-{settings['max_ply']} stones"
    held = len(book)
    part, note = f"{held}", ""
    if 0 < wanted < held:
        book = dataclasses.replace(book, moves=book.moves[:wanted], values=book.values[:wanted])
        part = f"{wanted} of its {held}"
    elif wanted > held:
        note = f" (it holds fewer than the {wanted} asked for)"
    log(f"adding the {name} book ({part} positions of {stones}) {copies} times{note}")
    return book


class TeacherReplayCallback(BaseCallback):
    """After each rollout, ``batches`` supervised minibatches of teacher positions (their own
    Adam, at PPO's current learning rate), so PPO's updates do not wash out what was taught.

    :meth:`state_dict` is what a checkpoint keeps of it (``train.resume_extras``): Adam's moments
    and where the index generator stands, so that a resumed run goes on with them rather than
    with a fresh Adam, whose first steps move every weight by about the learning rate at once."""

    def __init__(self, data: TeacherTensors, batches: int, seed: int) -> None:
        super().__init__()
        self.data, self.batches = data, batches
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer: torch.optim.Optimizer | None = None
        self._saved_optimizer: dict[str, Any] | None = None  # loaded once the optimizer exists

    def state_dict(self) -> dict[str, Any]:
        """The generator's state and the optimizer's (``None`` before the first replay)."""
        optimizer = self._saved_optimizer if self.optimizer is None else self.optimizer.state_dict()
        return {"generator": self.generator.get_state(), "optimizer": optimizer}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Go on from :meth:`state_dict`'s ``saved`` (before the first rollout ends; a copy is
        kept, since an optimizer's state dict holds its live tensors)."""
        optimizer = copy.deepcopy(saved["optimizer"])  # both read before either is set
        self.generator.set_state(saved["generator"])
        self._saved_optimizer = optimizer

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        policy = self.model.policy
        self.data = self.data.to(policy.device)  # once: the positions stay there
        if self.optimizer is None:
            self.optimizer = torch.optim.Adam(policy.parameters())
            if self._saved_optimizer is not None:
                self.optimizer.load_state_dict(self._saved_optimizer)
        for group in self.optimizer.param_groups:
            group["lr"] = policy.optimizer.param_groups[0]["lr"]
        policy.set_training_mode(True)
        total = 0.0
        for _ in range(self.batches):
            index = torch.randint(len(self.data), (TEACHER_BATCH,), generator=self.generator)
            mirror = bool(torch.rand(1, generator=self.generator) < 0.5)
            actor, critic = batch_losses(policy, self.data, index, mirror)
            self.optimizer.zero_grad()
            (actor + 0.5 * critic).backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            self.optimizer.step()
            total += actor.item()
        policy.set_training_mode(False)
        self.logger.record("teacher/actor_loss", total / max(self.batches, 1))
