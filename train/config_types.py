"""What each setting of :class:`connectx_train.config.TrainConfig` declares, in one place beside its
field, and the checks derived from the declarations.

:func:`setting` makes a dataclass field whose ``metadata[SETTING]`` is a :class:`Setting`: the
setting's help group and help text, its bounds or choices, an extra check of its text, and what a
``--resume`` may do with it (:class:`OnResume`; the value that reproduces a run saved before the
setting existed). ``TrainConfig.validate``, the ``connectx train`` flags
(:mod:`connectx_train.config_cli`), the help groups and the resume rules are all read from them.
Type and bound errors are one line naming the setting (``channels must be <= 1024, got 4096``),
whether the value comes from a flag, a ``config.json`` or a config made by hand.
"""

from __future__ import annotations

import argparse
import enum
import math
from collections.abc import Callable
from dataclasses import Field, dataclass, field
from typing import Any

__all__ = [
    "SETTING",
    "OnResume",
    "Setting",
    "argument_type",
    "check_setting",
    "check_setting_type",
    "declaration",
    "setting",
]

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
    :data:`connectx_train.help_text.GROUPS`). Numbers (and the items of a tuple of numbers) lie in
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
