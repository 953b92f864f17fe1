"""The policy registry: opponents by name, with lazy ``"module:attr"`` entry points.

The core registers its own policies in code (:func:`register_policy`); every installed package adds
its own through the ``connectx_gym.policies`` entry points (:mod:`connectx_gym.plugins`), the
search agents of this distribution among them. A name registered in code wins over an entry point.

A *spec* names a registered policy and, after a colon, its parameters::

    "random"                    "minimax:depth=4"            "alphabeta:time_budget=0.5"
    "kaggle:negamax"            "solver:time_budget=1,fallback_depth=8"
    "runs/ppo/final.npz"        (a path to a saved agent: a model file or a Kaggle agent ``.py``)
    "minimax:depth=3~0.25"      (any spec, softened: a random legal move with probability 0.25)

Parameter values are numbers (``4``, ``0.5``, ``1e-3``, ``nan``: read by
:func:`connectx_gym.numeric.parse_number`, which refuses ``1_0``), ``True``/``False``/``None``,
quoted strings (``'text'``) or bare words taken as strings. Names may contain colons
(``kaggle:negamax``); the parameters start at the first ``:``-separated part that holds an ``=``.
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import numbers
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, cast

import numpy as np

from connectx_gym.bitboard import Board
from connectx_gym.files import file_loaders
from connectx_gym.numeric import looks_numeric, parse_number
from connectx_gym.plugins import POLICIES_GROUP, check_entry_point, load_entry_point, plugins
from connectx_gym.policy import KaggleAgentPolicy, NoisyPolicy, Policy

__all__ = [
    "MAX_SPEC_LENGTH",
    "PolicyEntry",
    "as_kaggle_agent",
    "check_spec",
    "list_policies",
    "make_policy",
    "parse_spec",
    "policy_parameters",
    "register_policy",
]

#: The longest spec string :func:`make_policy` accepts (a path to a saved agent included).
MAX_SPEC_LENGTH = 1024


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy: its entry point (``"module:attr"``, an installed package's entry point
    or the factory itself) and default parameters."""

    name: str
    entry_point: str | EntryPoint | Callable[..., Policy]
    defaults: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Policy]:
        """Import and return the factory behind the entry point."""
        if callable(self.entry_point):
            return self.entry_point
        factory = load_entry_point(self.entry_point, f"policy {self.name!r}")
        if not callable(factory):
            written = getattr(self.entry_point, "value", self.entry_point)
            raise ImportError(
                f"cannot load policy {self.name!r}: entry point {written!r} names a "
                f"{type(factory).__name__}, not a factory"
            )
        # an entry point is checked callable here; what it makes is known only when called
        return cast("Callable[..., Policy]", factory)


_registry: dict[str, PolicyEntry] = {}


def register_policy(name: str, entry_point: str | Callable[..., Policy], **defaults: Any) -> None:
    """Register a policy factory under ``name``.

    ``entry_point`` is a ``"module:attr"`` string, imported only when the policy is first made, or
    the factory itself; ``defaults`` are keyword arguments given to it unless a spec overrides them.
    Registering a name again replaces the earlier entry.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"invalid policy name {name!r}")
    if any(character in name for character in "=,~") or len(name) > MAX_SPEC_LENGTH:
        raise ValueError(f"invalid policy name {name!r}: it may not contain '=', ',' or '~'")
    if isinstance(entry_point, str):
        check_entry_point(entry_point, f"policy {name!r}")
    elif not callable(entry_point):
        raise TypeError(
            f"entry point of policy {name!r} must be a 'module:attr' string or a callable, "
            f"got {entry_point!r}"
        )
    _registry[name] = PolicyEntry(name, entry_point, dict(defaults))


@functools.cache
def _plugin_entries() -> dict[str, PolicyEntry]:
    """The policies of the installed packages' ``connectx_gym.policies`` entry points."""
    entries = {}
    for name, entry in plugins(POLICIES_GROUP).items():
        if entry.attr:
            entries[name] = PolicyEntry(name, entry)
    return entries


def _entries() -> dict[str, PolicyEntry]:
    return {**_plugin_entries(), **_registry}


def list_policies() -> list[str]:
    """Names of the registered policies (in code and by entry points), sorted."""
    return sorted(_entries())


def policy_parameters(name: str) -> dict[str, Any] | None:
    """The parameters a spec may give the registered policy ``name``, with the defaults it gets
    (``inspect.Parameter.empty`` for one it needs); None when its factory's signature cannot be
    read (it takes ``**kwargs``, or a builtin). Imports the factory's module."""
    entry = _registered_entry(name, _entries())
    try:
        parameters = inspect.signature(entry.load()).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return None
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    found = {key: p.default for key, p in parameters.items() if p.kind in named}
    return {**found, **{k: v for k, v in entry.defaults.items() if k in found}}


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``"name:key=value,key=value"`` into the name and a dict of parameters."""
    parts = spec.strip().split(":")
    name_parts: list[str] = []
    while parts and "=" not in parts[0]:
        name_parts.append(parts.pop(0))
    name = ":".join(name_parts)
    if not name:
        raise ValueError(f"policy spec {spec!r} has no name")
    params: dict[str, Any] = {}
    for item in ":".join(parts).split(","):
        if not item.strip():
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"bad parameter {item!r} in policy spec {spec!r}: expected key=value")
        if key in params:
            raise ValueError(f"parameter {key!r} given twice in policy spec {spec!r}")
        try:
            params[key] = _parse_value(raw.strip(), key)
        except ValueError as error:
            raise ValueError(f"{error} in policy spec {spec!r}") from None
    return name, params


def _parse_value(raw: str, key: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    if looks_numeric(raw):  # one parser for numbers (nan and inf included, so range checks name
        return parse_number(raw, key)  # them), which refuses "1_0" rather than reading 10
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw
    if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
        return parse_number(raw, key)  # a number written otherwise ("(1_0)"): refused
    return value


def _is_path_spec(spec: str, registered: dict[str, PolicyEntry]) -> bool:
    """Whether ``spec`` names a saved agent: a loader's suffix (unless it reads as a registered
    policy with parameters, such as ``"mcts:net=runs/x/final.npz"``) or an existing file."""
    named = spec.split("=", 1)[0].rpartition(":")[0].strip() if "=" in spec else ""
    if spec.lower().endswith(tuple(file_loaders())) and named not in registered:
        return True
    try:
        return Path(spec).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def make_policy(spec: str | Policy | Callable[..., Any], **kwargs: Any) -> Policy:
    """A policy from a spec string, a :class:`Policy` (returned as is) or a Kaggle-style callable.

    ``kwargs`` override the spec's parameters, which override the registered defaults. Raises
    ``ValueError`` for an unknown name or a parameter the policy does not take, and
    ``FileNotFoundError`` for a path that does not exist.
    """
    if isinstance(spec, Policy):
        if kwargs:
            raise ValueError("parameters cannot be applied to an existing policy object")
        return spec
    if not isinstance(spec, str):
        if callable(spec):
            return KaggleAgentPolicy(spec, **kwargs)
        raise TypeError(f"a policy spec must be a string, a Policy or a callable, got {spec!r}")
    if len(spec) > MAX_SPEC_LENGTH:
        raise ValueError(
            f"policy spec of {len(spec)} characters is longer than {MAX_SPEC_LENGTH}: "
            f"{spec[:40]!r}..."
        )
    registered = _entries()
    base, tilde, noise = spec.rpartition("~")
    if tilde and spec.strip() not in registered and not _is_path_spec(spec.strip(), registered):
        return NoisyPolicy(make_policy(base, **kwargs), _parse_noise(noise, spec))
    if spec.strip() not in registered and _is_path_spec(spec.strip(), registered):
        return make_policy("file", path=spec.strip(), **kwargs)
    name, params = parse_spec(spec)
    entry = _registered_entry(name, registered)
    factory = entry.load()
    arguments = {**entry.defaults, **params, **kwargs}
    _check_parameters(name, factory, arguments, params)
    policy = factory(**arguments)
    if not isinstance(policy, Policy):
        raise TypeError(f"entry point of policy {name!r} returned {policy!r}, not a Policy")
    return policy


def _parse_noise(text: str, spec: str) -> float:
    try:
        value = float(parse_number(text, "noise"))
    except ValueError:
        message = f"bad noise {text!r} in policy spec {spec!r}: expected spec~0.25"
        raise ValueError(message) from None
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise ValueError(f"noise must be in [0, 1] in policy spec {spec!r}, got {text!r}")
    return value


def check_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``(name, parameters)`` of a ``"name:key=value"`` spec whose policy is registered and takes
    these parameters, of these kinds, checked without making the policy (nothing is loaded but
    the factory's module). Raises ``ValueError`` naming what is wrong."""
    name, params = parse_spec(spec)
    entry = _registered_entry(name, _entries())
    _check_parameters(name, entry.load(), {**entry.defaults, **params}, params)
    return name, params


def _registered_entry(name: str, registered: dict[str, PolicyEntry]) -> PolicyEntry:
    if name not in registered:
        hint = difflib.get_close_matches(name, list(registered), n=1)
        maybe = f" Did you mean {hint[0]!r}?" if hint else ""
        if not _plugin_entries():
            maybe += " (no installed package registers a policy: pip install -e . again?)"
        raise ValueError(
            f"unknown policy {name!r}.{maybe} Registered: {', '.join(list_policies())}"
        )
    return registered[name]


def _check_parameters(
    name: str, factory: Callable[..., Any], arguments: dict[str, Any], from_spec: dict[str, Any]
) -> None:
    """Refuse arguments the factory does not take, and values written in a spec (``from_spec``:
    numbers, words, None) of a kind its annotation rules out (``weights=random``)."""
    try:
        signature = inspect.signature(factory, eval_str=True)
    except (NameError, SyntaxError, TypeError, AttributeError):  # annotations it cannot read
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):
            return
    except ValueError:
        return
    parameters = signature.parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        accepted = {key for key, p in parameters.items() if p.kind in named}
        unknown = sorted(set(arguments) - accepted)
        if unknown:
            raise ValueError(
                f"policy {name!r} does not take parameter(s) {', '.join(unknown)}; "
                f"it takes: {', '.join(sorted(accepted)) or 'none'}"
            )
    for key, value in from_spec.items():
        parameter = parameters.get(key)
        if parameter is None or parameter.annotation is parameter.empty:
            continue
        if value is None and parameter.default is None:
            continue
        if not _admits(parameter.annotation, value):
            written = inspect.formatannotation(parameter.annotation)
            kind = re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", written)  # without module paths
            raise ValueError(
                f"parameter {key} of policy {name!r} takes {kind}, not {value!r}: a spec gives "
                "only numbers, True/False/None and words"
            )


def _admits(annotation: Any, value: Any) -> bool:
    """Whether a value read from a spec may be given for ``annotation`` (lenient: numbers pass
    any numeric annotation, which the factory checks itself; what it cannot tell passes)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_admits(member, value) for member in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    kind = origin or annotation
    if kind is None:
        kind = type(None)
    if not isinstance(kind, type) or kind is object:
        return True  # Any, a TypeVar, a string it could not resolve
    if isinstance(value, numbers.Number) and issubclass(kind, numbers.Number):
        return True
    return isinstance(value, kind)


def as_kaggle_agent(
    policy_or_spec: str | Policy | Callable[..., Any], seed: int | None = None
) -> Callable[[Any, Any], int]:
    """A Kaggle-style ``agent(obs, config) -> column`` playing ``policy_or_spec``.

    Works with kaggle-environments (which it does not import) and with plain dicts. The agent's
    randomness comes from ``numpy.random.default_rng(seed)``; the policy is reset whenever a
    position has no more stones than the previous one (a new game).
    """
    policy = make_policy(policy_or_spec)
    rng = np.random.default_rng(seed)
    last_moves = [-1]

    def agent(obs: Any, config: Any) -> int:
        board_list = obs["board"] if isinstance(obs, dict) else obs.board
        mark = obs["mark"] if isinstance(obs, dict) else obs.mark
        board = Board.from_kaggle(board_list, config, mark)
        if board.moves <= last_moves[0]:
            policy.reset()
        last_moves[0] = board.moves
        return int(policy.act(board, rng))

    agent.__name__ = f"{getattr(policy, 'name', 'policy')}_agent"
    return agent
