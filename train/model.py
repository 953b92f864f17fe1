"""The learner: building, saving and loading the MaskablePPO model and what a checkpoint keeps
beside it, its weights-only form, and the panel evaluation of those weights.

The functions here take the device and number format a run resolved once
(:class:`connectx_train.run_setup.RunSetup`); without them a model is built on the CPU in float32.

What a checkpoint keeps besides SB3's model (``checkpoint.zip``) and the run's state
(``state.json``) is in ``checkpoint_extras.pt`` (:func:`save_extras`), so that ``--resume`` goes on
where the run was rather than from what ``--seed`` set up at its start:

- the global random generators of torch (SB3 samples the rollouts' moves from it) and numpy (SB3
  shuffles the minibatches with it);
- the teacher replay's Adam moments and index generator
  (:meth:`connectx_train.teaching.TeacherReplay.state_dict`): a fresh Adam's first steps move
  every weight by about the learning rate at once, a jolt at every resume.

SB3 restarts the envs' games on resume; :func:`env_seed` seeds them from ``--seed`` and the step
reached, not from the seed alone, for the same reason. A resumed run is still not byte-equal to an
uninterrupted one (the games in flight and the part of the rollout collected at the checkpoint are
not kept), but one checkpoint always resumes to the same weights (on one machine, as ``--seed``
gives the same weights there).

The extras file holds tensors, plain numbers and text only, read back with
``torch.load(weights_only=True)``, and the digest of the ``checkpoint.zip`` it was saved with. One
written at other steps than the checkpoint (the run stopped between the two writes), with another
checkpoint (copied from another run, or from another save of this one at the same step), missing
or unreadable is left aside, saying so: the streams then stay as ``--seed`` set them and the
replay starts with a fresh Adam.

:class:`LastUpdate` holds what a checkpoint keeps at the last complete update (step count, the
run's state, the random streams), so that a rollout cut by the time bound can be undone and the
checkpoint saved as of that update.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import VecEnv

from connectx_gym.bitboard import Geometry
from connectx_gym.files import SHIPPED_WEIGHTS, NumpyNetPolicy, load_file, shipped_weights
from connectx_gym.logs import warn
from connectx_gym.match import play_match
from connectx_gym.outputs import write_atomically
from connectx_gym.weights import WeightsFile
from connectx_train.config import TrainConfig
from connectx_train.networks import ConnectXCNN, ConnectXPolicy, ResidualBlock, numpy_weights
from connectx_train.sb3_files import (
    GEOMETRY_ATTRIBUTE,
    load_error_reason,
    renamed_module_objects,
    without_gym,
    write_torch_atomically,
)
from connectx_train.state import RunState

__all__ = [
    "CHECKPOINT_FILE",
    "EXTRAS_FILE",
    "LastUpdate",
    "LinearSchedule",
    "checkpoint_digest",
    "env_seed",
    "evaluate_panel",
    "load_model",
    "model_weights",
    "new_model",
    "perfect_play_rates",
    "policy_kwargs",
    "read_init_weights",
    "restore_extras",
    "save_extras",
    "save_model",
    "start_from_weights",
]

#: the checkpoint's SB3 model, in the run's output directory
CHECKPOINT_FILE = "checkpoint.zip"
#: the checkpoint's extras, beside it
EXTRAS_FILE = "checkpoint_extras.pt"


class LinearSchedule:
    """Learning rate decaying linearly from ``start`` to ``end`` (picklable, for SB3)."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end

    def __call__(self, progress_remaining: float) -> float:
        return self.end + (self.start - self.end) * progress_remaining


def policy_kwargs(config: TrainConfig, bf16: bool = False) -> dict[str, Any]:
    """The policy's settings: the network of ``config``, with bfloat16 products in passes that
    compute gradients when ``bf16``."""
    return {
        "features_extractor_class": ConnectXCNN,
        "features_extractor_kwargs": {
            "channels": config.channels,
            "blocks": config.blocks,
            "features_dim": config.features_dim,
            "bf16": bf16,
        },
        "net_arch": {"pi": [], "vf": list(config.vf_layers)},
        "activation_fn": torch.nn.ReLU,
        # SB3's Adam settings (eps=1e-5) with the fused kernel: one pass over all parameters.
        "optimizer_kwargs": {"eps": 1e-5, "fused": True},
    }


def new_model(
    config: TrainConfig,
    env: VecEnv,
    out: Path,
    device: str | torch.device = "cpu",
    bf16: bool = False,
) -> MaskablePPO:
    """A fresh MaskablePPO with the network and PPO settings of ``config``, logging to
    ``out/tb``, on ``device`` (bfloat16 products with ``bf16``: :func:`policy_kwargs`)."""
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
        policy_kwargs=policy_kwargs(config, bf16),
        tensorboard_log=str(out / "tb"),
        seed=config.seed,
        device=device,
        verbose=0,
    )
    # Saved in the model's zip: the Kaggle export reads the board size back from it.
    setattr(model, GEOMETRY_ATTRIBUTE, [config.rows, config.columns, config.inarow])
    return model


def read_init_weights(text: str, geometry: Geometry) -> WeightsFile:
    """The weights of ``--init-weights``: a shipped network's or a weights-only ``.npz`` file's,
    for the run's board, or ``ValueError`` (``FileNotFoundError``) saying why not."""
    path = shipped_weights(text) if text in SHIPPED_WEIGHTS else Path(text)
    loaded = load_file(str(path))
    if not isinstance(loaded, WeightsFile):
        raise ValueError(f"--init-weights {text}: not a weights-only network")
    board = loaded.geometry
    if (board.rows, board.columns, board.inarow) != (
        geometry.rows,
        geometry.columns,
        geometry.inarow,
    ):
        raise ValueError(
            f"--init-weights {text}: its board is {board.rows}x{board.columns} with "
            f"{board.inarow} in a row, the run's {geometry.rows}x{geometry.columns} with "
            f"{geometry.inarow}"
        )
    return loaded


def _named_modules(policy: ConnectXPolicy) -> dict[str, torch.nn.Module]:
    """The policy's layers under the array names of the weights-only export
    (:func:`connectx_train.networks.numpy_weights`)."""
    modules: dict[str, torch.nn.Module] = {}
    extractors = [("", policy.pi_features_extractor)]
    if not policy.share_features_extractor:
        extractors.append(("vf_features.", policy.vf_features_extractor))
    for prefix, extractor in extractors:
        if not isinstance(extractor, ConnectXCNN):
            raise ValueError("only ConnectXCNN networks start from weights-only files")
        modules[f"{prefix}stem"] = extractor.stem
        for index, block in enumerate(cast("Iterable[ResidualBlock]", extractor.blocks)):
            modules[f"{prefix}block{index}.conv1"] = block.conv1
            modules[f"{prefix}block{index}.conv2"] = block.conv2
        modules[f"{prefix}column"] = extractor.column
        modules[f"{prefix}head"] = extractor.head
    modules["action"] = policy.action_net
    for index, layer in enumerate(policy.mlp_extractor.value_net):
        if isinstance(layer, torch.nn.Linear):
            modules[f"value_mlp.{index}"] = layer
    modules["value"] = policy.value_net
    return modules


def start_from_weights(policy: torch.nn.Module, weights: WeightsFile, source: str) -> str:
    """Copy the arrays of ``weights`` into ``policy`` (the same network settings) and say what
    was read. The logits' layers must all be there with the policy's shapes, or ``ValueError``
    names the first that is not; the critic is read too when the file has a whole value head of
    the same shapes, and left as initialised otherwise."""
    if not isinstance(policy, ConnectXPolicy):
        raise ValueError("only ConnectXPolicy networks start from weights-only files")
    modules = _named_modules(policy)
    critic = {n for n in modules if n.startswith(("value", "vf_features."))}

    def pairs(names: Iterable[str]) -> Iterator[tuple[str, torch.Tensor, np.ndarray | None]]:
        for name in names:
            for part in ("weight", "bias"):
                key = f"{name}.{part}"
                yield key, getattr(modules[name], part), weights.params.get(key)

    def fits(parameter: torch.Tensor, array: np.ndarray | None) -> bool:
        return array is not None and tuple(array.shape) == tuple(parameter.shape)

    copies: list[tuple[torch.Tensor, np.ndarray | None]] = []
    for key, parameter, array in pairs(n for n in modules if n not in critic):
        if array is None or not fits(parameter, array):
            found = "missing" if array is None else f"of shape {tuple(array.shape)}"
            raise ValueError(
                f"{source}: {key} is {found}, the network's is {tuple(parameter.shape)} "
                "(give the file's --channels, --blocks and --features-dim)"
            )
        copies.append((parameter, array))
    value = list(pairs(sorted(critic)))
    with_value = weights.value is not None and all(fits(p, array) for _, p, array in value)
    if with_value:
        copies.extend((parameter, array) for _, parameter, array in value)
    with torch.no_grad():
        for parameter, array in copies:
            parameter.copy_(torch.as_tensor(np.array(array, dtype=np.float32)))
    said = "and its value head" if with_value else "(the value head starts fresh)"
    return f"starting from the weights of {source} {said}"


def load_model(
    path: Path,
    env: VecEnv,
    out: Path,
    device: str | torch.device = "cpu",
    kwargs: dict[str, Any] | None = None,
) -> MaskablePPO:
    """The checkpoint at ``path`` (SB3 zip, optimizer and step count included), on ``env``,
    logging to ``out/tb`` (the same TensorBoard run goes on), on ``device`` whatever device
    saved it; with ``kwargs`` (:func:`policy_kwargs`) its network is built with them, as this
    session resolved them (a run may go on on another machine), rather than as saved."""
    objects = renamed_module_objects(path)
    if kwargs is not None:
        objects["policy_kwargs"] = kwargs
    try:
        model = MaskablePPO.load(path, env=env, device=device, custom_objects=objects)
    except Exception as error:  # zipfile, pickle, torch and SB3 errors alike
        reason = f"{type(error).__name__}: {load_error_reason(error)}"
        raise ValueError(f"{path}: not a loadable checkpoint ({reason})") from None
    model.tensorboard_log = str(out / "tb")
    return model


def save_model(model: MaskablePPO, path: Path) -> None:
    """``model.save`` to a temporary file, then a rename onto ``path``
    (:func:`connectx_gym.outputs.write_atomically`)."""
    with without_gym():  # SB3 lists gym's version in the file, and importing gym prints a banner
        write_atomically(path, model.save)


def model_weights(model: MaskablePPO, geometry: Geometry) -> WeightsFile:
    """The network of ``model`` in the weights-only format (numpy inference): its policy's
    logits and its critic as the value head."""
    return numpy_weights(model.policy, geometry)


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


def perfect_play_rates(weights: WeightsFile, split: str) -> dict[str, Any] | None:
    """Mistake and perfect-move rates of the deterministic agent on the shipped labelled
    positions of ``split`` (:mod:`connectx_baselines.perfect_play`; ``"dev"`` during the run,
    ``"test"``
    in the final report), or None for a board size without a shipped set."""
    from connectx_baselines.perfect_play import evaluate_policy, load_positions

    positions = load_positions(split=split)
    if positions.geometry != weights.geometry:
        return None
    agent = NumpyNetPolicy(weights, deterministic=True, name="agent")
    result = evaluate_policy(agent, positions).to_dict()
    result["split"] = split
    return result


class ReplayState(Protocol):
    """What a checkpoint keeps of the teacher replay
    (:class:`connectx_train.teaching.TeacherReplay`)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, saved: dict[str, Any]) -> None: ...


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
    replay: ReplayState | None,
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
    replay: ReplayState | None,
    log: Callable[[str], None],
    checkpoint: Path | None = None,
) -> bool:
    """Set the global generators (and ``replay``) to the extras at ``path`` if they were saved
    with the checkpoint at ``timesteps`` whose file is ``checkpoint`` (by default
    :data:`CHECKPOINT_FILE` beside ``path``); whether they were (otherwise the log says why
    not)."""
    checkpoint = path.with_name(CHECKPOINT_FILE) if checkpoint is None else checkpoint
    if not path.is_file():
        warn(
            log,
            f"no {path.name} in the run (saved before it existed): random streams seeded afresh",
        )
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
    warn(log, f"left aside {path} ({reason}): random streams seeded afresh")
    return False


def env_seed(seed: int, timesteps: int) -> int:
    """The envs' seed in a run with ``seed`` resumed at ``timesteps`` (below 2**31)."""
    return int(np.random.SeedSequence([seed, timesteps]).generate_state(1)[0] >> 1)


@dataclass
class LastUpdate:
    """What a checkpoint holds of PPO at its last complete update that a rollout changes (taken
    before each rollout, :meth:`take`): the step count and episode statistics of the model, the
    run's state (its curriculum and opponent draws) and the random streams (torch's and numpy's
    global ones, which the checkpoint's extras save). A rollout cut by the time bound or a stop
    signal is not trained on: :meth:`cut` puts them back, so that the checkpoint then saved, and
    ``--resume`` from it, are those of a stop right after the last update."""

    timesteps: int
    episodes: tuple[Any, Any]
    state: dict[str, Any]
    torch_rng: torch.Tensor
    numpy_rng: Any

    @classmethod
    def take(cls, model: MaskablePPO, state: RunState) -> LastUpdate:
        """The model and ``state`` as they are now."""
        # the lists that grow a point per rollout (and are never changed in place) are copied
        # shallowly, the rest deeply (the curriculum's history is)
        fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
        growing = ("train_curve", "evaluations")
        kept = {k: list(v) if k in growing else copy.deepcopy(v) for k, v in fields.items()}
        episodes = (copy.copy(model.ep_info_buffer), copy.copy(model.ep_success_buffer))
        numpy_rng = np.random.get_state()  # noqa: NPY002 (SB3's minibatch shuffles use it)
        return cls(int(model.num_timesteps), episodes, kept, torch.get_rng_state(), numpy_rng)

    def cut(self, model: MaskablePPO, state: RunState, size: int, by_time: bool = True) -> str:
        """Put back the model and ``state`` after the time bound (``by_time``) or a stop signal
        cut a rollout of ``size`` steps; the log line that says so."""
        done = int(model.num_timesteps) - self.timesteps
        model.num_timesteps = self.timesteps
        model.ep_info_buffer, model.ep_success_buffer = self.episodes
        for name, value in self.state.items():
            setattr(state, name, value)
        state.stopped_by_time = by_time
        torch.set_rng_state(self.torch_rng)
        np.random.set_state(self.numpy_rng)  # noqa: NPY002
        what = "the time limit" if by_time else "a stop signal"
        return (
            f"PPO: {what} cut the rollout from step {self.timesteps:,} after {done:,} of "
            f"its {size:,} steps; they are not trained on nor counted: the run stops at step "
            f"{self.timesteps:,} (its last update), where --resume goes on"
        )
