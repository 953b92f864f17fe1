"""SB3 ``.zip`` models as weights-only networks: the ``.zip`` loader of
:func:`connectx_gym.files.file_loaders` (a ``connectx_gym.loaders`` entry point).

**Unpickles the file** (SB3's format): load only models you trust, and share agents as ``.npz``.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

from connectx_gym.bitboard import Geometry
from connectx_gym.files import UNPICKLE_WARNING
from connectx_gym.weights import WeightsFile

__all__ = ["GEOMETRY_ATTRIBUTE", "renamed_module_objects", "weights_from_sb3"]

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
        from connectx_train.torch_files import load_error_reason
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
    _, rows, columns = model.observation_space.shape
    rows_columns_inarow = getattr(model, GEOMETRY_ATTRIBUTE, None) or (rows, columns, 4)
    try:
        return numpy_weights(model.policy, Geometry(*rows_columns_inarow))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
