"""The types of :class:`connectx_train.config.TrainConfig`'s settings, checked where settings come
from outside the command line (a ``config.json`` read back by ``--resume``, a hand-made config): one
line naming the setting (``setting channels must be a whole number, got 'abc'``) instead of an
error deep in the run."""

from __future__ import annotations

from typing import Any

__all__ = ["check_setting_type"]

#: what each annotation's values are called in messages: one, several
_TYPE_NAMES = {
    "int": ("a whole number", "whole numbers"),
    "float": ("a number", "numbers"),
    "str": ("text", "strings"),
    "bool": ("true or false", "booleans"),
}


def check_setting_type(name: str, annotation: str, value: Any) -> None:
    """``ValueError`` naming setting ``name`` when ``value`` is not of its type: ``annotation`` is
    the field's type as written (``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"int | None"``,
    ``"tuple[str, ...]"``). Booleans are not numbers and whole numbers are ints (``64.0`` is
    refused, as everywhere else in the package)."""
    kind = annotation.removesuffix(" | None")
    optional = kind != annotation
    if value is None and optional:
        return
    item = kind.removeprefix("tuple[").removesuffix(", ...]")
    if item != kind:
        fits = isinstance(value, (tuple, list)) and all(_fits(item, v) for v in value)
        expected = "a list of " + _TYPE_NAMES.get(item, (item, item))[1]
    else:
        fits, expected = _fits(kind, value), _TYPE_NAMES.get(kind, (kind, kind))[0]
    if not fits:
        none = " or null" if optional else ""
        raise ValueError(f"setting {name} must be {expected}{none}, got {value!r}")


def _fits(kind: str, value: Any) -> bool:
    if kind == "bool" or isinstance(value, bool):
        return kind == "bool" and isinstance(value, bool)
    accepted = {"int": int, "float": (int, float), "str": str}.get(kind, object)
    return isinstance(value, accepted)
