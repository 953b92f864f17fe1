"""The grammar of an opponent mixture (``--opponent``, ``--curriculum`` stages): ``spec[@weight]``
items joined by ``+``, for example ``"minimax:depth=2@3+onestep"``; each env plays a policy drawn
with those weights (default 1). A spec may end in ``~epsilon`` (``"onestep~0.25"``: a random legal
column a quarter of the time), which the policy registry reads."""

from __future__ import annotations

import contextlib
import math

__all__ = ["parse_mixture"]


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
