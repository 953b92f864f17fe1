"""Which policy specs a request may name, and the policies they make, for ``connectx serve``.

A request names its opponent with an ordinary spec (``"minimax:depth=3"``, ``"onestep~0.25"``,
``"agent.npz"``), but a page reachable over HTTP must not let a request read any file or run for
ever, so :func:`checked_spec` accepts only

- registered names (not ``file``), with time budgets, depths and table sizes capped
  (:data:`LIMITS`), and string parameters that are themselves registered specs
  (``solver:fallback=alphabeta``);
- saved agents by a path relative to the ``--models`` directory, resolved inside it: ``.npz``
  weights (never unpickled) and Kaggle ``.py`` agents the person serving put there. SB3 ``.zip``
  models are refused: loading one unpickles, which runs code from the file.

Searches whose cost grows with the board are capped by its size too: full-width depths
(:data:`MAX_LEAVES`, fewer on boards beyond 64 bits, searched in plain Python) and
kaggle-environments' negamax (:data:`KAGGLE_NEGAMAX_WORK`). ``.py`` agents and ``kaggle:*``
agents, plain Python that nothing can interrupt, run in child processes
(:class:`~connectx_gym.serve.child.ChildPolicy`) killed at each request's deadline.

Every refusal is a :class:`SpecError` with a one-line message (a 400 or 403 answer).
"""

from __future__ import annotations

import inspect
import math
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from connectx_gym.bitboard import Geometry
from connectx_gym.files import SHIPPED_WEIGHTS
from connectx_gym.policy import NoisyPolicy, Policy
from connectx_gym.registry import (
    check_spec,
    list_policies,
    make_policy,
    parse_spec,
    policy_parameters,
)
from connectx_gym.serve.child import ChildPolicy
from connectx_gym.serve.validation import shown

__all__ = [
    "KAGGLE_NEGAMAX_WORK",
    "LIMITS",
    "MAX_LEAVES",
    "MAX_SPEC_LENGTH",
    "PolicyCache",
    "SpecError",
    "checked_spec",
    "list_models",
    "opponent_choices",
]

#: The largest value a request may give each numeric parameter (seconds, plies, entries).
LIMITS: dict[str, float] = {
    "time_budget": 5.0,
    "depth": 7,
    "max_depth": 12,
    "fallback_depth": 12,
    "node_limit": 50_000_000,
    "table_bits": 22,  # 67 MB a table: the cache's 16 policies stay near 1 GB
    "simulations": 100_000,  # mcts: a tree of well under a million nodes
    "rollouts": 64,  # mcts: random games per leaf, each simulation's work
    "batch": 256,  # mcts: leaves per call of its network
    "solver_nodes": 1_000_000,  # mcts: the solver's nodes per leaf, about 0.15 s compiled
}
#: Full-width searches (``depth``) may visit at most about this many leaves, ``columns ** depth``:
#: a few seconds at most (compiled; on boards beyond 64 bits, plain Python: MAX_LEAVES_PLAIN).
MAX_LEAVES = 10_000_000
MAX_LEAVES_PLAIN = 200_000
#: kaggle-environments' negamax looks 4 plies ahead in plain Python, about columns ** 4 * cells
#: steps: at most this (6x7 is 100842, about a second; 6x8 fits, 7x9 does not).
KAGGLE_NEGAMAX_WORK = 250_000
MAX_SPEC_LENGTH = 300
#: The strongest opponent the package ships, offered after the searches led by each network: the
#: shipped network's search with the exact solver proving its leaves of 16 stones or more.
STRONGEST_SEARCH = "mcts:net=ppo,solver_nodes=20000"
#: Saved agents the page may load (``.zip`` unpickles, so it is never served).
SERVED_SUFFIXES = (".npz", ".py")


class SpecError(ValueError):
    """A spec this server refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def list_models(models: Path | None) -> list[str]:
    """Saved agents under ``models``, as the relative paths a request names them by: only those
    a request may load (a symbolic link that leads out of ``models`` is left out, as
    :func:`_model_path` refuses it)."""
    if models is None or not models.is_dir():
        return []
    root = models.resolve()
    found = [
        p
        for p in models.rglob("*")
        if p.is_file() and p.suffix.lower() in SERVED_SUFFIXES and p.resolve().is_relative_to(root)
    ]
    return sorted(p.relative_to(models).as_posix() for p in found)[:500]


def opponent_choices(models: Path | None) -> list[dict[str, Any]]:
    """The opponents the page offers, networks first: the shipped weights (``ppo`` first), a
    search guided by each (``mcts:net=ppo``) and :data:`STRONGEST_SEARCH`, the ``.npz`` networks
    under ``models``, the other registered policies, then the ``.py`` agents under ``models``.
    Each is ``{"spec", "kind"}`` (``network``, ``policy`` or ``agent``), registered ones with
    ``parameters``: a list of ``{"name", "default"}`` (``"required": true`` for one without a
    default), or None where the registry cannot tell."""
    names = [name for name in list_policies() if name != "file"]
    shipped = sorted(SHIPPED_WEIGHTS, key=lambda name: name != "ppo")
    saved = list_models(models)
    searches = [f"mcts:net={name}" for name in shipped] + [STRONGEST_SEARCH]
    networks: list[dict[str, Any]] = [
        *({"spec": name, "kind": "network"} for name in shipped if name in names),
        *({"spec": spec, "kind": "network"} for spec in searches if "mcts" in names),
        *({"spec": name, "kind": "network"} for name in saved if name.lower().endswith(".npz")),
    ]
    others = [
        {"spec": name, "kind": "agent" if name.startswith("kaggle:") else "policy"}
        for name in names
        if name not in shipped
    ]
    agents = [{"spec": name, "kind": "agent"} for name in saved if name.lower().endswith(".py")]
    for choice in networks + others:
        name, given = parse_spec(choice["spec"])
        if name in names:
            choice["parameters"] = _parameters(name, set(given))
    return networks + others + agents


def _parameters(name: str, given: set[str]) -> list[dict[str, Any]] | None:
    """``{"name", "default"}`` (and ``"max"``, this server's cap) of each parameter of ``name``
    that ``given`` does not hold; a default that is not a plain value is None."""
    try:
        found = policy_parameters(name)
    except (ImportError, ValueError):  # a plugin whose module does not load
        return None
    if found is None:
        return None
    listed: list[dict[str, Any]] = []
    for key, default in found.items():
        if key in given:
            continue
        entry: dict[str, Any] = {"name": key}
        if default is inspect.Parameter.empty:
            entry["required"] = True
        else:
            plain = isinstance(default, str | bool | int | float) or default is None
            entry["default"] = default if plain else None
        if key in LIMITS:
            entry["max"] = LIMITS[key]
        listed.append(entry)
    return listed


def _model_path(name: str, models: Path | None) -> Path:
    """The file ``name`` (relative to ``models``) leads to; it must lie inside ``models`` and
    have the suffix the name shows (``agent.npz`` linking to a ``.zip`` would unpickle it).
    Messages name the file as the request did, never the server's own paths."""
    if models is None:
        raise SpecError(
            f"{name!r}: saved agents are off; start the server with --models DIR", status=403
        )
    suffix = Path(name).suffix.lower()
    if suffix == ".zip":
        raise SpecError(
            f"{name!r}: SB3 .zip models are never loaded over HTTP (loading one unpickles, which "
            "runs code); use the .npz weights saved next to it",
            status=403,
        )
    if suffix not in SERVED_SUFFIXES:
        raise SpecError(f"{name!r}: saved agents are .npz or .py files", status=400)
    if "\x00" in name or any(len(os.fsencode(part)) > 255 for part in Path(name).parts):
        raise SpecError(f"{shown(name)}: not a file name (a NUL byte, or a part over 255 bytes)")
    root = models.resolve()
    try:
        path = (root / name).resolve()
        found = path.is_file()
    except (OSError, ValueError) as error:
        raise SpecError(f"{shown(name)}: not a file name ({error})") from None
    if Path(name).is_absolute() or not path.is_relative_to(root):
        raise SpecError(f"{name!r} is not inside the models directory", status=403)
    if not found:
        raise SpecError(f"no saved agent {name!r} in the models directory", status=404)
    if path.suffix.lower() != suffix:
        raise SpecError(
            f"{name!r} leads to a {path.suffix.lower() or 'suffix-less'} file, not a {suffix} one",
            status=403,
        )
    return path


def _check_parameter(key: str, value: Any, geometry: Geometry) -> None:
    columns = geometry.columns
    if isinstance(value, str) and key not in LIMITS:
        checked_spec(value, None, geometry, nested=True)
        return
    if key in LIMITS:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise SpecError(f"{key} must be a number, got {value!r}")
        if value > LIMITS[key]:
            cap = LIMITS[key]
            shown_cap = f"{cap:.0f}" if cap == int(cap) else f"{cap:g}"
            raise SpecError(f"{key} must be <= {shown_cap} on this server, got {value!r}")
        leaves = MAX_LEAVES if geometry.fits_64_bits else MAX_LEAVES_PLAIN
        if key == "depth" and value > 1 and columns**value > leaves:
            deepest = int(math.log(leaves) / math.log(columns))
            raise SpecError(
                f"depth {value} on {columns} columns is too deep for this server "
                f"(at most {deepest} on a {geometry.rows}x{columns} board)"
            )
    elif not (value is None or isinstance(value, bool | int | float)):
        raise SpecError(f"parameter {key}={value!r} is not allowed on this server")


def checked_spec(
    spec: Any, models: Path | None, geometry: Geometry | None = None, nested: bool = False
) -> tuple[str, float]:
    """``(spec to make, noise)`` for a spec a request may use on a ``geometry`` board (6x7 by
    default).

    Raises :class:`SpecError`.
    """
    geometry = geometry or Geometry()
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(f"opponent must be a policy spec (a string), got {spec!r}")
    if len(spec) > MAX_SPEC_LENGTH:
        raise SpecError(f"policy spec longer than {MAX_SPEC_LENGTH} characters")
    spec = spec.strip()
    names = [name for name in list_policies() if name != "file"]
    base, tilde, suffix = spec.rpartition("~")
    noise = 0.0
    if tilde and not nested:
        try:
            noise = float(suffix)
        except ValueError:
            raise SpecError(f"noise after '~' must be a number, got {suffix!r}") from None
        if not 0 <= noise <= 1:
            raise SpecError(f"noise after '~' must be in [0, 1], got {suffix!r}")
        spec = base.strip()
    if spec.startswith("kaggle:"):
        _check_kaggle(spec, geometry, nested)
    if spec in names:
        return spec, noise
    if spec.lower().endswith((*SERVED_SUFFIXES, ".zip")) and "=" not in spec:
        if nested:
            raise SpecError(f"{spec!r}: parameters cannot name files", status=403)
        return str(_model_path(spec, models)), noise
    try:
        name, params = parse_spec(spec)
    except ValueError as error:
        raise SpecError(str(error)) from None
    if name == "file":
        if nested or set(params) != {"path"} or not isinstance(params["path"], str):
            raise SpecError("file: takes only path='relative/path.npz'", status=403)
        return str(_model_path(params["path"], models)), noise
    if name not in names:
        raise SpecError(f"unknown policy {name!r}; registered: {', '.join(names)}")
    for key, value in params.items():
        _check_parameter(key, value, geometry)
    try:  # the names and kinds of the parameters, before anything is made or started
        check_spec(spec)
    except ValueError as error:
        raise SpecError(" ".join(str(error).split())) from None
    return spec, noise


def _check_kaggle(spec: str, geometry: Geometry, nested: bool) -> None:
    if nested:
        raise SpecError(f"{spec!r} cannot be a parameter of another policy on this server")
    work = geometry.columns**4 * geometry.cells
    if spec.startswith("kaggle:negamax") and work > KAGGLE_NEGAMAX_WORK:
        raise SpecError(
            f"kaggle:negamax is too slow on a {geometry.rows}x{geometry.columns} board for this "
            f"server (it takes about columns**4 * cells = {work} steps; at most "
            f"{KAGGLE_NEGAMAX_WORK}, e.g. 6x8)"
        )


def runs_in_child(spec: str) -> bool:
    """Whether a checked spec is plain Python that nothing interrupts (``.py`` files and
    ``kaggle:*`` agents): the server runs it in a child process."""
    return spec.startswith("kaggle:") or spec.lower().endswith(".py")


class PolicyCache:
    """The last few policies made, by spec and board geometry (searches keep their tables
    between requests; agents in child processes keep running between them).

    A policy keeps tables for each geometry it plays; one policy per geometry here bounds the
    memory of the cache by its ``size``, whatever boards the requests name.
    """

    def __init__(self, size: int = 16, models: Path | None = None) -> None:
        self.size = size
        self.models = models
        self._policies: OrderedDict[tuple[str, float, Geometry], Policy] = OrderedDict()
        self._children: dict[str, ChildPolicy] = {}

    def get(self, spec: str, noise: float = 0.0, geometry: Geometry | None = None) -> Policy:
        """The policy of an already checked spec for ``geometry`` boards (made on first use)."""
        key = (spec, noise, geometry or Geometry())
        if key in self._policies:
            self._policies.move_to_end(key)
            return self._policies[key]
        policy = self._child(spec) if runs_in_child(spec) else make_policy(spec)
        if noise:
            policy = NoisyPolicy(policy, noise)
        self._policies[key] = policy
        while len(self._policies) > self.size:
            self._policies.popitem(last=False)
        in_use = {s for s, _, _ in self._policies}
        for gone in set(self._children) - in_use:
            self._children.pop(gone).close()
        return policy

    def _child(self, spec: str) -> ChildPolicy:
        if spec not in self._children:  # one process per agent, noisy or not
            label = spec
            if self.models is not None and Path(spec).is_relative_to(self.models):
                label = Path(spec).relative_to(self.models).as_posix()
            self._children[spec] = ChildPolicy(spec, label)
        return self._children[spec]

    def close(self) -> None:
        """Kill the agents' child processes and forget every policy."""
        for child in self._children.values():
            child.close()
        self._children.clear()
        self._policies.clear()
