"""Files that torch writes and reads for a run: atomic saves, and load errors told safely.

``torch.load(weights_only=True)`` refuses a file holding anything but tensors and plain values,
and its message then advises re-running with ``weights_only=False``: advice that runs the file's
code, never to be passed on to users. :func:`load_error_reason` turns any load error into one line
without it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from connectx_gym.outputs import write_atomically

__all__ = ["load_error_reason", "write_torch_atomically"]

_UNPICKLER_DETAIL = re.compile(
    r"WeightsUnpickler error:\s*(.*?)\s*(Check the documentation|$)", re.S
)


def load_error_reason(error: BaseException) -> str:
    """One line saying why a file could not be loaded, without torch's advice to load it
    unsafely (``weights_only=False``, or allowing more classes): "not a weights-only file
    (Unsupported global: ...)" for a file holding other objects, else the first sentence of the
    error."""
    text = " ".join(str(error).split())
    if "Weights only load failed" in text or "weights_only" in text:
        found = _UNPICKLER_DETAIL.search(" ".join(str(error).split()))
        detail = found.group(1).strip() if found else ""
        detail = re.split(r"(?<=[.!?])\s", detail, maxsplit=1)[0]  # what, not torch's advice
        detail = "" if "weights_only" in detail or "safe_globals" in detail else detail
        return "not a weights-only file" + (f" ({detail})" if detail else "")
    if not text:
        return type(error).__name__
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first if len(first) <= 200 else first[:197] + "..."


def write_torch_atomically(path: Path, saved: dict[str, Any]) -> None:
    """Save ``saved`` to ``path`` through a temporary file, so no reader sees half of it (the
    supervised passes of :mod:`connectx_train.teacher`, a checkpoint's extras in
    :mod:`connectx_train.resume_extras`)."""
    import torch

    write_atomically(path, lambda temporary: torch.save(saved, temporary))
