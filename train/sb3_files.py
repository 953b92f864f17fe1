"""SB3 ``.zip`` models as weights-only networks: the ``.zip`` loader of
:func:`connectx_gym.files.file_loaders` (a ``connectx_gym.loaders`` entry point).

**Unpickles the file** (SB3's format): load only models you trust, and share agents as ``.npz``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from connectx_gym.bitboard import Geometry
from connectx_gym.files import UNPICKLE_WARNING
from connectx_gym.weights import WeightsFile

__all__ = ["GEOMETRY_ATTRIBUTE", "weights_from_sb3"]

TRAIN_HINT = 'pip install "connectx-gym[train]"'
#: Attribute of a saved model holding its ``(rows, columns, inarow)``.
GEOMETRY_ATTRIBUTE = "connectx_geometry"


def weights_from_sb3(path: str | Path) -> WeightsFile:
    """The policy of an SB3 MaskablePPO ``.zip`` (trained with :class:`train.networks.ConnectXCNN`)
    in the weights-only format. **Unpickles the file** (SB3's format): trusted files only."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {path}")
    try:
        from sb3_contrib import MaskablePPO

        from train.networks import numpy_layers
        from train.torch_files import load_error_reason
    except ImportError as error:
        raise ImportError(
            f"loading SB3 models needs the training extra: {TRAIN_HINT} ({error})"
        ) from None

    warnings.warn(UNPICKLE_WARNING, UserWarning, stacklevel=2)
    try:
        model = MaskablePPO.load(path, device="cpu")
    except Exception as error:
        reason = f"{type(error).__name__}: {load_error_reason(error)}"
        raise ValueError(f"{path} is not a loadable MaskablePPO model ({reason})") from None
    _, rows, columns = model.observation_space.shape
    rows_columns_inarow = getattr(model, GEOMETRY_ATTRIBUTE, None) or (rows, columns, 4)
    layers, params = numpy_layers(model.policy)
    try:
        return WeightsFile(Geometry(*rows_columns_inarow), layers, params)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
