"""Command-line arguments the benchmark scripts share."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["count_at_least"]


def count_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``minimum``, else a one-line usage error
    (``argument --limit: must be at least 1, got 0``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse
