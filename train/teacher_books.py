"""``--teacher-book``: the shipped books a run adds to its teacher positions, as one list.

The list is ``NAME:COPIES[:FIRST]`` items joined by commas: ``COPIES`` copies of book ``NAME``'s
first ``FIRST`` positions, or of the whole book without ``FIRST`` (the books,
:data:`connectx_baselines.teacher_book.BOOKS`: ``opening`` 5 to 11 stones, ``early`` 12 to 20,
``middle`` 21 to 28, each exactly labelled once outside any run). ``none`` adds no book. The default
run pins its counts (``opening:2:1929,...``) so that it reproduces when a book grows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "NO_BOOKS",
    "BookUse",
    "format_teacher_books",
    "parse_teacher_books",
    "upgrade_saved_books",
]

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


def _positive(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {text!r}")
    return value
