"""Kaggle export: one self-contained ``main.py`` with the weights embedded and numpy-only inference.

The file holds the network as a base64 ``.npz`` in the weights-only format, the source of
:func:`connectx_gym.files.forward_layers` and its helpers (copied with ``inspect.getsource``, so
the exported agent runs exactly the forward pass that the ``.npz`` loader runs), and an
``agent(obs, config)`` that plays the masked argmax of the logits. It imports only numpy and the
standard library. Converting an SB3 ``.zip`` needs torch; exporting from a ``.npz`` does not.
"""

from __future__ import annotations

import base64
import inspect
import io
import json
import warnings
from pathlib import Path

import numpy as np

from connectx_gym import files
from connectx_gym.bitboard import Geometry
from connectx_gym.files import WeightsFile, load_weights

__all__ = ["export_kaggle", "kaggle_source", "weights_from_sb3"]

GEOMETRY_ATTRIBUTE = "connectx_geometry"

_AGENT_SOURCE = '''
def _load_network():
    buffer = io.BytesIO(base64.b64decode(_WEIGHTS))
    with np.load(buffer, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    return meta, arrays


_META, _PARAMS = _load_network()


def _setting(source, key):
    return source[key] if isinstance(source, dict) else getattr(source, key)


def agent(obs, config):
    """Masked argmax of the network's logits for the player to move."""
    rows, columns = int(_setting(config, "rows")), int(_setting(config, "columns"))
    if (rows, columns, int(_setting(config, "inarow"))) != (
        _META["rows"], _META["columns"], _META["inarow"]
    ):
        raise ValueError("this agent was trained on another board size")
    grid = np.asarray(_setting(obs, "board"), dtype=np.int64).reshape(rows, columns)
    mark = int(_setting(obs, "mark"))
    planes = np.stack([grid == mark, grid == 3 - mark])
    logits = masked_logits(_META["layers"], _PARAMS, planes, grid[0] == 0)
    return int(np.argmax(logits))
'''


def weights_from_sb3(path: str | Path) -> WeightsFile:
    """The policy of an SB3 MaskablePPO ``.zip`` (trained with :class:`train.networks.ConnectXCNN`)
    in the weights-only format. **Unpickles the file** (SB3's format): trusted files only."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such model file: {path}")
    from sb3_contrib import MaskablePPO

    warnings.warn(files.UNPICKLE_WARNING, UserWarning, stacklevel=2)
    from train.networks import numpy_layers

    try:
        model = MaskablePPO.load(path, device="cpu")
    except Exception as error:
        raise ValueError(f"{path} is not a loadable MaskablePPO model ({error!r})") from None
    _, rows, columns = model.observation_space.shape
    rows_columns_inarow = getattr(model, GEOMETRY_ATTRIBUTE, None) or (rows, columns, 4)
    layers, params = numpy_layers(model.policy)
    return WeightsFile(Geometry(*rows_columns_inarow), layers, params)


def kaggle_source(weights: WeightsFile) -> str:
    """The text of a self-contained Kaggle agent file playing ``weights``."""
    buffer = io.BytesIO()
    arrays = {"__meta__": np.array(json.dumps(weights.meta)), **weights.params}
    np.savez_compressed(buffer, **arrays)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    g = weights.geometry
    forward = "\n\n".join(
        inspect.getsource(function)
        for function in (files.conv2d_same, files.forward_layers, files.masked_logits)
    )
    header = (
        f'"""ConnectX agent exported by connectx-gym: a policy network for {g.rows}x{g.columns}, '
        f"{g.inarow} in a row.\n\nSelf-contained: numpy only, weights embedded (weights-only "
        f'.npz, base64). Plays the masked argmax of the logits.\n"""\n\n'
        "import base64\nimport io\nimport json\n\nimport numpy as np\n\n"
    )
    wrapped = "\n".join(encoded[i : i + 96] for i in range(0, len(encoded), 96))
    return f'{header}_WEIGHTS = """\n{wrapped}\n"""\n\n\n{forward}\n\n{_AGENT_SOURCE.lstrip()}'


def export_kaggle(model: str | Path, output: str | Path = "main.py") -> Path:
    """Write the Kaggle agent file for ``model`` (a ``.npz`` weights file or an SB3 ``.zip``)."""
    model = Path(model)
    if not model.is_file():
        raise FileNotFoundError(f"no such model file: {model}")
    suffix = model.suffix.lower()
    if suffix == ".npz":
        weights = load_weights(model)
    elif suffix == ".zip":
        weights = weights_from_sb3(model)
    else:
        raise ValueError(f"cannot export {model}: expected a .npz weights file or an SB3 .zip")
    output = Path(output)
    temporary = output.with_name(output.name + ".tmp")
    temporary.write_text(kaggle_source(weights))
    temporary.replace(output)
    return output
