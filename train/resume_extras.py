"""What a checkpoint keeps besides SB3's model (``checkpoint.zip``) and the run's state
(``state.json``), in ``checkpoint_extras.pt``, so that ``--resume`` goes on where the run was
rather than from what ``--seed`` set up at its start:

- the global random generators of torch (SB3 samples the rollouts' moves from it) and numpy (SB3
  shuffles the minibatches with it), which a resumed run used to seed again from ``--seed``,
  drawing the numbers its first rollouts drew;
- the teacher replay's Adam moments and index generator
  (:meth:`connectx_train.teacher_replay.TeacherReplayCallback.state_dict`): a fresh Adam's first
  steps move every weight by about the learning rate at once, a jolt at every resume.

SB3 restarts the envs' games on resume; :func:`env_seed` seeds them from ``--seed`` and the step
reached, not from the seed alone, for the same reason. A resumed run is still not byte-equal to an
uninterrupted one (the games in flight and the part of the rollout collected at the checkpoint are
not kept), but one checkpoint always resumes to the same weights (on one machine, as ``--seed``
gives the same weights there).

The file holds tensors, plain numbers and text only, read back with
``torch.load(weights_only=True)``, and the digest of the ``checkpoint.zip`` it was saved with. One
written at other steps than the checkpoint (the run stopped between the two writes), with another
checkpoint (copied from another run, or from another save of this one at the same step), missing
(a run saved before it existed) or unreadable is left aside, saying so: the streams then stay as
``--seed`` set them and the replay starts with a fresh Adam, as before this file existed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from connectx_train.teacher_replay import TeacherReplayCallback
from connectx_train.torch_files import load_error_reason, write_torch_atomically

__all__ = [
    "CHECKPOINT_FILE",
    "EXTRAS_FILE",
    "checkpoint_digest",
    "env_seed",
    "restore_extras",
    "save_extras",
]

#: the checkpoint's extras, in the run's output directory beside ``checkpoint.zip``
EXTRAS_FILE = "checkpoint_extras.pt"
#: the checkpoint the extras belong to, beside them
CHECKPOINT_FILE = "checkpoint.zip"


def checkpoint_digest(path: Path) -> str | None:
    """A fingerprint of the checkpoint file at ``path`` (None when there is none)."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def save_extras(
    path: Path,
    timesteps: int,
    replay: TeacherReplayCallback | None,
    checkpoint: Path | None = None,
) -> None:
    """Write the extras of a checkpoint at ``timesteps`` to ``path`` atomically, with the digest
    of that checkpoint's file (``checkpoint``, by default :data:`CHECKPOINT_FILE` beside
    ``path``), written before them."""
    checkpoint = path.with_name(CHECKPOINT_FILE) if checkpoint is None else checkpoint
    # numpy's legacy global generator: the one SB3's rollout buffer shuffles minibatches with
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()  # noqa: NPY002
    extras = {
        "timesteps": int(timesteps),
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "position": int(position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "replay": None if replay is None else replay.state_dict(),
        "checkpoint": checkpoint_digest(checkpoint),
    }
    write_torch_atomically(path, extras)


def restore_extras(
    path: Path,
    timesteps: int,
    replay: TeacherReplayCallback | None,
    log: Callable[[str], None],
    checkpoint: Path | None = None,
) -> bool:
    """Set the global generators (and ``replay``) to the extras at ``path`` if they were saved
    with the checkpoint at ``timesteps`` whose file is ``checkpoint`` (by default
    :data:`CHECKPOINT_FILE` beside ``path``); whether they were (otherwise the log says why
    not)."""
    checkpoint = path.with_name(CHECKPOINT_FILE) if checkpoint is None else checkpoint
    if not path.is_file():
        log(f"no {path.name} in the run (saved before it existed): random streams seeded afresh")
        return False
    before = torch.get_rng_state(), np.random.get_state()  # noqa: NPY002
    try:
        extras: Any = torch.load(path, weights_only=True, map_location="cpu")
        same_checkpoint = extras.get("checkpoint", "none saved") == checkpoint_digest(checkpoint)
        if extras["timesteps"] == timesteps and same_checkpoint:
            saved = extras["numpy_rng"]
            numpy_state = (
                saved["kind"],
                saved["keys"].numpy().astype(np.uint32),
                saved["position"],
                saved["has_gauss"],
                saved["cached_gaussian"],
            )
            torch.set_rng_state(extras["torch_rng"])
            np.random.set_state(numpy_state)  # noqa: NPY002 - SB3's generator, as saved
            if replay is not None and extras["replay"] is not None:
                replay.load_state_dict(extras["replay"])  # last: it changes nothing if it fails
            return True
        reason = (
            f"saved at step {extras['timesteps']}, the checkpoint is at {timesteps}: "
            "stopped between the two writes"
        )
        if extras["timesteps"] == timesteps:
            reason = (
                f"saved with another {checkpoint.name} (another run's, or another save at the "
                "same step)"
                if "checkpoint" in extras
                else f"saved without the digest of its {checkpoint.name} (an older version)"
            )
    except Exception as error:  # any damage: one clear line, and the run resumes without it
        torch.set_rng_state(before[0])  # undo what was set before the damage showed
        np.random.set_state(before[1])  # noqa: NPY002
        reason = f"{type(error).__name__}: {load_error_reason(error)}"
    log(f"left aside {path} ({reason}): random streams seeded afresh")
    return False


def env_seed(seed: int, timesteps: int) -> int:
    """The envs' seed in a run with ``seed`` resumed at ``timesteps`` (below 2**31)."""
    return int(np.random.SeedSequence([seed, timesteps]).generate_state(1)[0] >> 1)
