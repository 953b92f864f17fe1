"""The types of the settings of :class:`connectx_train.config.TrainConfig`: what each setting
declares, in one place beside its field, the checks derived from the declarations, the help groups
they are listed in, and the text forms of the two settings whose values are lists.

:func:`setting` makes a dataclass field whose ``metadata[SETTING]`` is a :class:`Setting`: the
setting's help group (one of :data:`GROUPS`) and help text, its bounds or choices, an extra check of
its text, and what a ``--resume`` may do with it (:class:`OnResume`; the value that reproduces a run
saved before the setting existed). ``TrainConfig.validate``, the ``connectx train`` flags
(:mod:`connectx_train.config_cli`), the help groups and the resume rules are all read from them.
Type and bound errors are one line naming the setting (``channels must be <= 1024, got 4096``),
whether the value comes from a flag, a ``config.json`` or a config made by hand.

Two settings are lists written as text:

- an opponent mixture (``--opponent``, ``--curriculum`` stages, :func:`parse_mixture`):
  ``spec[@weight]`` items joined by ``+``, for example ``"minimax:depth=2@3+onestep"``; each env
  plays a policy drawn with those weights (default 1). A spec may end in ``~epsilon``
  (``"onestep~0.25"``: a random legal column a quarter of the time), which the policy registry
  reads;
- ``--teacher-book`` (:func:`parse_teacher_books`): the shipped books a run adds to its teacher
  positions, ``NAME:COPIES[:FIRST]`` items joined by commas: ``COPIES`` copies of book ``NAME``'s
  first ``FIRST`` positions, or of the whole book without ``FIRST`` (the books,
  :data:`connectx_baselines.teacher_book.BOOKS`: ``opening`` 5 to 11 stones, ``early`` 12 to 20,
  ``middle`` 21 to 28 of games, ``random`` 12 to 41 and ``random_opening`` 6 to 11 of random legal
  play, each exactly labelled once outside any run). ``none`` adds no book. The
  default run pins its counts (``opening:2:1929,...``) so that it reproduces when a book grows.

Settings that an older version saved (a run's ``config.json``) are read in today's names by
:func:`upgrade_saved_settings`, so that ``--resume`` and ``--config`` go on with what the older run
was given.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field
from typing import Any

from connectx_gym.files import SHIPPED_WEIGHTS

__all__ = [
    "BOARD",
    "DEFAULT_OPENING_PLIES",
    "DEVICES",
    "EVALUATION",
    "GROUPS",
    "MAX_COUNT",
    "MAX_REPEATS",
    "MAX_TRAIN_SEED",
    "MAX_WIDTH",
    "NETWORK",
    "NO_BOOKS",
    "OPPONENTS",
    "PERFORMANCE",
    "PPO",
    "PRECISIONS",
    "REPORT_SPLITS",
    "RUN",
    "SETTING",
    "TEACHER",
    "TEACHER_LABELS",
    "VEC_ENVS",
    "BookUse",
    "OnResume",
    "Setting",
    "argument_type",
    "board_setting",
    "check_init_weights",
    "check_rollout",
    "check_setting",
    "check_setting_type",
    "count_setting",
    "declaration",
    "format_teacher_books",
    "machine_setting",
    "network_setting",
    "parse_mixture",
    "parse_teacher_books",
    "ppo_setting",
    "setting",
    "share_setting",
    "upgrade_saved_books",
    "upgrade_saved_settings",
]

#: the choices of ``--vec-env``
VEC_ENVS = ("batched", "subproc", "dummy")
#: the choices of ``--teacher-labels``
TEACHER_LABELS = ("shipped", "label")
#: the choices of ``--precision``
PRECISIONS = ("auto", "bf16", "fp32")
#: the choices of ``--device``
DEVICES = ("auto", "cpu", "cuda")
#: the choices of ``--report-split``: splits of the shipped labelled positions
REPORT_SPLITS = ("test", "dev")
#: random stones before each training game when ``opening_plies`` is unset (capped by the board)
DEFAULT_OPENING_PLIES = 4
#: the largest seed (numpy's global seed, which SB3 sets, takes 32 bits; the run adds offsets)
MAX_TRAIN_SEED = 2**31 - 1
#: the most steps, games and positions a setting may ask for
MAX_COUNT = 10**10
#: the most channels, units of a dense layer, envs, threads or processes
MAX_WIDTH = 4096
#: the most passes, blocks, layers, snapshots and the like
MAX_REPEATS = 1000


def check_init_weights(text: str) -> None:
    """Refuse an ``init_weights`` that is neither empty, a shipped network's name nor a path to
    a weights-only ``.npz`` (the file itself is read when the network is built)."""
    if text and text not in SHIPPED_WEIGHTS and not text.endswith(".npz"):
        shipped = ", ".join(SHIPPED_WEIGHTS)
        raise ValueError(f"{text!r} is neither a shipped network ({shipped}) nor a .npz file")


def check_rollout(n_envs: int, n_steps: int, timesteps: int) -> None:
    """Refuse a rollout (``n_envs`` x ``n_steps``) longer than the run, suggesting one that fits."""
    rollout = n_envs * n_steps
    if rollout <= timesteps:
        return
    if timesteps >= n_envs:
        smaller = f"lower --n-steps to {timesteps // n_envs} or less"
    else:
        smaller = f"lower --n-envs to {timesteps} or less with --n-steps 1"
    raise ValueError(
        f"one rollout (--n-envs {n_envs} x --n-steps {n_steps} = {rollout:,} steps) is more than "
        f"--timesteps {timesteps:,}: {smaller}, or raise --timesteps to {rollout:,} or more"
    )


RUN = "run and output"
BOARD = "board"
OPPONENTS = "opponents and curriculum"
TEACHER = "teacher (supervised learning from exact solver labels)"
PPO = "PPO"
NETWORK = "network"
EVALUATION = "evaluation"
PERFORMANCE = "performance"

#: the help groups of ``connectx train --help``, in the order they are listed
GROUPS = (RUN, BOARD, OPPONENTS, TEACHER, PPO, NETWORK, EVALUATION, PERFORMANCE)

#: the key of a field's metadata that holds its :class:`Setting`
SETTING = "setting"
#: ``setting(added_later=...)`` not given: an older file without the setting takes its default
ABSENT: Any = object()

#: what each annotation's values are called in messages: one, several
_TYPE_NAMES = {
    "int": ("a whole number", "whole numbers"),
    "float": ("a number", "numbers"),
    "str": ("text", "strings"),
    "bool": ("true or false", "booleans"),
}


class OnResume(enum.Enum):
    """What ``connectx train --resume`` may do with a setting."""

    #: may change on any ``--resume``, and shapes nothing the run learns (where it writes, its
    #: time bound, threads, processes and device, how the play weights are averaged at the end)
    FREE = "free"
    #: may change on ``--resume``: the run goes on with the new value
    CHANGES = "changes"
    #: held by the run's checkpoint (the board, the network, PPO's own settings, the seed): a
    #: ``--resume`` that changes it is refused
    FIXED = "fixed"


@dataclass(frozen=True)
class Setting:
    """The declaration of one setting (see :func:`setting`)."""

    help: str
    group: str
    on_resume: OnResume
    low: float | None = None
    high: float | None = None
    low_excluded: bool = False
    max_items: int | None = None
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], object] | None = None
    #: the value of :func:`setting`'s ``added_later``, when ``has_added_later``
    added_later: Any = None
    has_added_later: bool = False
    metavar: str | None = None
    default_text: str | None = None
    repeatable: bool = False
    flag_alone: str | None = None


def setting(
    default: Any,
    *,
    help: str,
    group: str,
    on_resume: OnResume,
    bounds: tuple[float, float] | None = None,
    low_excluded: bool = False,
    max_items: int | None = None,
    choices: tuple[str, ...] | None = None,
    check: Callable[[Any], object] | None = None,
    added_later: Any = ABSENT,
    metavar: str | None = None,
    default_text: str | None = None,
    repeatable: bool = False,
    flag_alone: str | None = None,
) -> Any:
    """A dataclass field with its :class:`Setting`.

    ``help`` is the flag's help text and ``group`` its help group (a title of
    :data:`GROUPS`). Numbers (and the items of a tuple of numbers) lie in
    ``bounds`` ``(low, high)``, both included (``low`` excluded with ``low_excluded``; floats
    finite); text is one of ``choices``; ``check`` raises ``ValueError`` for a bad text (or item of
    a tuple); a tuple has at most ``max_items``. ``on_resume``: :class:`OnResume`. ``added_later``:
    the value that keeps a run saved before the setting existed as it was, where the default would
    change it. ``repeatable``: the flag is given once per item (``--opponent A --opponent B``)
    instead of taking several values. ``flag_alone``: the value of the flag given without one
    (``--ray`` alone: ``"local"``).
    """
    low, high = bounds if bounds is not None else (None, None)
    declared = Setting(
        help,
        group,
        on_resume,
        low,
        high,
        low_excluded,
        max_items,
        choices,
        check,
        None if added_later is ABSENT else added_later,
        added_later is not ABSENT,
        metavar,
        default_text,
        repeatable,
        flag_alone,
    )
    metadata = {SETTING: declared}
    if isinstance(default, tuple):
        return field(default_factory=lambda: default, metadata=metadata)
    return field(default=default, metadata=metadata)


def count_setting(default: int, help: str, group: str, on_resume: OnResume, low: int = 1) -> Any:
    """A count of ``low`` to :data:`MAX_COUNT` (steps, games, positions)."""
    return setting(default, help=help, group=group, on_resume=on_resume, bounds=(low, MAX_COUNT))


def share_setting(default: float, help: str, group: str = OPPONENTS) -> Any:
    """A share from 0 to 1 that a ``--resume`` may change (of games, of a win rate)."""
    return setting(default, help=help, group=group, on_resume=OnResume.CHANGES, bounds=(0, 1))


#: Settings that shape what a run learns, fixed for its life: PPO's, the network's, the board's.
ppo_setting = functools.partial(setting, group=PPO, on_resume=OnResume.FIXED)
network_setting = functools.partial(setting, group=NETWORK, on_resume=OnResume.FIXED)
board_setting = functools.partial(setting, group=BOARD, on_resume=OnResume.FIXED)
#: Where and how fast the run computes, nothing it learns.
machine_setting = functools.partial(setting, group=PERFORMANCE, on_resume=OnResume.FREE)


def declaration(f: Field[Any]) -> Setting:
    """The :class:`Setting` of field ``f`` (``ValueError`` for a field made without
    :func:`setting`)."""
    declared = f.metadata.get(SETTING)
    if not isinstance(declared, Setting):
        raise ValueError(
            f"setting {f.name} is not declared with connectx_train.config_types.setting"
        )
    return declared


def check_setting(name: str, annotation: str, declared: Setting, value: Any) -> None:
    """``ValueError`` naming setting ``name`` when ``value`` is not of its type (``annotation``,
    the field's type as written) or breaks its declaration's bounds, choices or check."""
    check_setting_type(name, annotation, value)
    if value is None:
        return
    if isinstance(value, tuple | list):
        if declared.max_items is not None and len(value) > declared.max_items:
            raise ValueError(f"{name} takes at most {declared.max_items} values, got {len(value)}")
        for item in value:
            _check_value(name, declared, item)
    else:
        _check_value(name, declared, value)


def _check_value(name: str, declared: Setting, value: Any) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        low, high = declared.low, declared.high
        if low is not None and declared.low_excluded and not value > low:
            raise ValueError(f"{name} must be > {_shown(low)}, got {value!r}")
        if low is not None and value < low:
            raise ValueError(f"{name} must be >= {_shown(low)}, got {value!r}")
        if high is not None and value > high:
            raise ValueError(f"{name} must be <= {_shown(high)}, got {value!r}")
    elif isinstance(value, str):
        if declared.choices is not None and value not in declared.choices:
            raise ValueError(f"{name} must be one of {', '.join(declared.choices)}, got {value!r}")
        if declared.check is not None:
            declared.check(value)


def _shown(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def argument_type(name: str, annotation: str, declared: Setting) -> Callable[[str], Any]:
    """The argparse ``type`` of setting ``name``'s flag (of one item, for a tuple): the text read
    as the setting's kind and checked against its declaration, a one-line argparse error when
    it does not fit."""
    kind = _item_kind(annotation)
    convert: Callable[[str], Any] = {"int": int, "float": float}.get(kind, str)
    expected = _TYPE_NAMES.get(kind, (kind, kind))[0]

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        try:
            _check_value(name, declared, value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return value

    parse.__name__ = expected
    return parse


def check_setting_type(name: str, annotation: str, value: Any) -> None:
    """``ValueError`` naming setting ``name`` when ``value`` is not of its type: ``annotation`` is
    the field's type as written (``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"int | None"``,
    ``"tuple[str, ...]"``). Booleans are not numbers and whole numbers are ints (``64.0`` is
    refused, as everywhere else in the package)."""
    kind = annotation.removesuffix(" | None")
    optional = kind != annotation
    if value is None and optional:
        return
    item = _item_kind(kind)
    if item != kind:
        fits = isinstance(value, tuple | list) and all(_fits(item, v) for v in value)
        expected = "a list of " + _TYPE_NAMES.get(item, (item, item))[1]
    else:
        fits, expected = _fits(kind, value), _TYPE_NAMES.get(kind, (kind, kind))[0]
    if not fits:
        none = " or null" if optional else ""
        raise ValueError(f"setting {name} must be {expected}{none}, got {value!r}")


def _item_kind(annotation: str) -> str:
    """``"tuple[int, ...]"`` -> ``"int"``; ``"int | None"`` -> ``"int"``; others as they are."""
    kind = annotation.removesuffix(" | None")
    return kind.removeprefix("tuple[").removesuffix(", ...]")


def _fits(kind: str, value: Any) -> bool:
    if kind == "bool" or isinstance(value, bool):
        return kind == "bool" and isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float)
    return isinstance(value, {"int": int, "str": str}.get(kind, object))


def parse_mixture(text: str) -> list[tuple[str, float]]:
    """``"minimax:depth=2@3+onestep"`` -> ``[("minimax:depth=2", 3.0), ("onestep", 1.0)]``."""
    items: list[tuple[str, float]] = []
    for part in text.split("+"):
        spec, weight = part.strip(), 1.0
        head, at, tail = spec.rpartition("@")
        if at:
            with contextlib.suppress(ValueError):
                spec, weight = head.strip(), float(tail)
        if not spec:
            raise ValueError(f"empty opponent in mixture {text!r}")
        if not (weight > 0 and math.isfinite(weight)):
            raise ValueError(f"opponent weight must be a finite number > 0 in {text!r}")
        items.append((spec, weight))
    return items


#: the ``--teacher-book`` value that adds no book
NO_BOOKS = "none"


@dataclass(frozen=True)
class BookUse:
    """``copies`` copies of the first ``first`` positions of book ``name`` (all when None)."""

    name: str
    copies: int
    first: int | None = None

    def __str__(self) -> str:
        return f"{self.name}:{self.copies}" + ("" if self.first is None else f":{self.first}")


def parse_teacher_books(text: str) -> tuple[BookUse, ...]:
    """``"opening:2:1929,early:1"`` -> its :class:`BookUse` items, in order; ``ValueError`` naming
    the item at fault (an unknown book, a count that is not a positive integer, a book twice)."""
    from connectx_baselines.teacher_book import BOOKS  # the solver's modules: not for --help

    if text.strip().lower() == NO_BOOKS:
        return ()
    uses: list[BookUse] = []
    for item in text.split(","):
        parts = [part.strip() for part in item.split(":")]
        if not 2 <= len(parts) <= 3 or not parts[0]:
            raise ValueError(
                f"teacher_book item {item.strip()!r} is not NAME:COPIES or NAME:COPIES:FIRST "
                f"(for example 'opening:2,early:1:27278'; '{NO_BOOKS}' for no book)"
            )
        name = parts[0]
        if name not in BOOKS:
            raise ValueError(f"unknown teacher book {name!r}; books: {', '.join(BOOKS)}")
        if any(use.name == name for use in uses):
            raise ValueError(f"teacher book {name!r} is given twice in {text!r}")
        copies = _positive(parts[1], f"copies of the {name} book")
        first = _positive(parts[2], f"positions of the {name} book") if len(parts) == 3 else None
        uses.append(BookUse(name, copies, first))
    return tuple(uses)


def format_teacher_books(uses: tuple[BookUse, ...]) -> str:
    """The ``--teacher-book`` text of ``uses`` (:func:`parse_teacher_books` reads it back)."""
    return ",".join(map(str, uses)) if uses else NO_BOOKS


def _positive(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {text!r}")
    return value


#: the six settings ``--teacher-book`` replaced, per book: (copies, positions; 0 was the whole)
OLD_BOOK_SETTINGS = {
    "opening": ("teacher_book", "teacher_book_positions"),
    "early": ("teacher_early_book", "teacher_early_book_positions"),
    "middle": ("teacher_middle_book", "teacher_middle_book_positions"),
}


def upgrade_saved_books(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A run's saved settings with the six book settings of older versions (``teacher_book`` as
    a number of copies, ``teacher_book_positions``, ``teacher_early_book`` and so on) turned into
    the one ``teacher_book`` list, so that ``--resume`` trains on the same positions; newer
    settings are returned as they are. A book setting absent from an older file was added later
    and was off for that run."""
    if not isinstance(saved.get("teacher_book"), int):
        return dict(saved)
    data = dict(saved)
    uses = []
    for name, (copies_key, positions_key) in OLD_BOOK_SETTINGS.items():
        copies, positions = data.pop(copies_key, 0), data.pop(positions_key, 0)
        if copies:
            uses.append(BookUse(name, copies, positions or None))
    data["teacher_book"] = format_teacher_books(tuple(uses))
    return data


def upgrade_saved_settings(saved: dict[str, Any]) -> dict[str, Any]:
    """Settings saved by an older version in today's names: the six book settings as one
    ``teacher_book`` list (:func:`upgrade_saved_books`) and ``vec_env`` ``'auto'`` (subprocesses,
    a choice since removed) as ``'subproc'``."""
    data = upgrade_saved_books(saved)
    if data.get("vec_env") == "auto":
        data["vec_env"] = "subproc"
    return data
