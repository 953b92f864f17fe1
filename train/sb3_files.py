"""SB3 and torch at the package's edges: the files they write and read, and SB3's import.

- SB3 ``.zip`` models as weights-only networks: the ``.zip`` loader of
  :func:`connectx_gym.files.file_loaders` (a ``connectx_gym.loaders`` entry point,
  :func:`weights_from_sb3`). **Unpickles the file** (SB3's format): load only models you trust,
  and share agents as ``.npz``.
- Files torch writes and reads for a run (:func:`write_torch_atomically`):
  ``torch.load(weights_only=True)`` refuses a file holding anything but tensors and plain values,
  and its message then advises re-running with ``weights_only=False``: advice that runs the
  file's code, never to be passed on to users. :func:`load_error_reason` turns any load error
  into one line without it.
- SB3 without the unmaintained ``gym``: Stable-Baselines3 imports ``gym`` when it is installed
  (kaggle-environments brings it) only to convert old gym envs, which connectx-gym never gives
  it, and to list its version in the ``system_info.txt`` of every saved model; the import prints
  gym's four-line "unmaintained" notice on stderr. :func:`install_without_gym` makes ``gym``
  unimportable while SB3's module that imports it (:data:`SB3_GYM_MODULE`) runs, and
  :func:`without_gym` while a model is saved, and only then: SB3 takes gym as absent, and
  anything else that imports ``gym`` still gets it. ``import connectx_train`` installs it, before
  anything imports SB3 (subprocess env workers too: :mod:`connectx_train.opponents`).

This module imports neither SB3 nor torch at its top.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.abc
import importlib.machinery
import io
import json
import pickle
import re
import sys
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from connectx_gym.bitboard import Geometry
from connectx_gym.files import UNPICKLE_WARNING
from connectx_gym.outputs import write_atomically
from connectx_gym.weights import WeightsFile

__all__ = [
    "GEOMETRY_ATTRIBUTE",
    "SB3_GYM_MODULE",
    "install_without_gym",
    "load_error_reason",
    "renamed_module_objects",
    "weights_from_sb3",
    "without_gym",
    "write_torch_atomically",
]

TRAIN_HINT = 'pip install "connectx-gym[train]"'
#: Attribute of a saved model holding its ``(rows, columns, inarow)``.
GEOMETRY_ATTRIBUTE = "connectx_geometry"


#: The import names this distribution's packages had before they were installed under names that a
#: user's own ``train.py`` or ``baselines/`` cannot shadow; models saved then refer to them.
_EARLIER_NAMES = {"train": "connectx_train", "baselines": "connectx_baselines"}
_EARLIER_MODULE = re.compile(rb"(?<![\w.])(?:train|baselines)\.[a-z_]")


class _RenamingUnpickler(pickle.Unpickler):
    """Reads a pickle whose classes live in modules of :data:`_EARLIER_NAMES`."""

    def find_class(self, module: str, name: str) -> Any:
        top, dot, rest = module.partition(".")
        return super().find_class(_EARLIER_NAMES.get(top, top) + dot + rest, name)


def renamed_module_objects(path: str | Path) -> dict[str, Any]:
    """The objects of an SB3 ``.zip`` (``policy_kwargs`` and the like) that name this package's
    modules by their earlier import names, read with the current names: pass them to
    ``MaskablePPO.load(custom_objects=...)``. Empty for a model saved by this version, or for a
    file that is not an SB3 zip (SB3's own load then says what is wrong). **Unpickles** those
    entries, as SB3's load does: trusted files only."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return {}
    objects: dict[str, Any] = {}
    for key, entry in data.items() if isinstance(data, dict) else ():
        if not (isinstance(entry, dict) and isinstance(entry.get(":serialized:"), str)):
            continue
        raw = base64.b64decode(entry[":serialized:"])
        if _EARLIER_MODULE.search(raw):
            objects[key] = _RenamingUnpickler(io.BytesIO(raw)).load()
    return objects


def weights_from_sb3(path: str | Path) -> WeightsFile:
    """The network of an SB3 MaskablePPO ``.zip`` (trained with
    :class:`connectx_train.networks.ConnectXCNN`) in the weights-only format, value head
    included. **Unpickles the file** (SB3's format): trusted files only."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {path}")
    try:
        from sb3_contrib import MaskablePPO

        from connectx_train.networks import numpy_weights
    except ImportError as error:
        raise ImportError(
            f"loading SB3 models needs the training extra: {TRAIN_HINT} ({error})"
        ) from None

    warnings.warn(UNPICKLE_WARNING, UserWarning, stacklevel=2)
    try:
        model = MaskablePPO.load(path, device="cpu", custom_objects=renamed_module_objects(path))
    except Exception as error:
        reason = f"{type(error).__name__}: {load_error_reason(error)}"
        raise ValueError(f"{path} is not a loadable MaskablePPO model ({reason})") from None
    shape = model.observation_space.shape or ()
    if len(shape) != 3:
        raise ValueError(f"{path}: its observations are not (planes, rows, columns), got {shape}")
    _, rows, columns = shape
    rows_columns_inarow = getattr(model, GEOMETRY_ATTRIBUTE, None) or (rows, columns, 4)
    try:
        return numpy_weights(model.policy, Geometry(*rows_columns_inarow))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


# --- files torch writes and reads ----------------------------------------------------------------

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


# --- SB3 without gym ------------------------------------------------------------------------------

#: SB3's module that imports ``gym`` when it can
SB3_GYM_MODULE = "stable_baselines3.common.vec_env.patch_gym"


@contextlib.contextmanager
def without_gym() -> Iterator[None]:
    """A block in which ``import gym`` raises ``ImportError`` (unless gym was imported before)."""
    if "gym" in sys.modules:
        yield
        return
    sys.modules["gym"] = None  # type: ignore[assignment]  # then "import gym" raises ImportError
    try:
        yield
    finally:
        if "gym" in sys.modules and sys.modules["gym"] is None:
            del sys.modules["gym"]


class _LoaderWithoutGym(importlib.abc.Loader):
    """Runs a module with ``gym`` unimportable (unless gym was imported already)."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        with without_gym():
            self.loader.exec_module(module)


class _SB3WithoutGym(importlib.abc.MetaPathFinder):
    """Finds :data:`SB3_GYM_MODULE` as usual and gives it the loader above."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != SB3_GYM_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _LoaderWithoutGym(spec.loader)
        return spec


def install_without_gym() -> None:
    """Put the finder first on ``sys.meta_path`` (once; nothing to do once SB3 is imported)."""
    if SB3_GYM_MODULE in sys.modules:
        return
    if not any(isinstance(finder, _SB3WithoutGym) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SB3WithoutGym())
