"""Kaggle export: one self-contained ``main.py`` with the weights embedded and numpy-only inference
(``connectx export-kaggle MODEL``); a search led by a network exports through
:mod:`connectx_train.kaggle_search`.

The file holds the network as a base64 ``.npz`` in the weights-only format and the whole source of
:mod:`connectx_gym.forward` and :mod:`connectx_gym.weights` (the modules the ``.npz`` loader uses:
the exported agent reads its weights and runs exactly the same forward pass), then an
``agent(obs, config)`` that plays the legal column with the highest logit: it never answers an
illegal column (:func:`export_kaggle`). It imports only numpy and the standard library, and
threadpoolctl where it imports (Kaggle's image has it), to hold numpy's BLAS to one thread during a
move. Converting an SB3 ``.zip`` needs torch; exporting from a ``.npz`` does not.

The checks the exports share with the ONNX export (:mod:`connectx_train.onnx_export`) are here:
the model file an export reads (:func:`model_file`), the output that may not be that file
(:func:`refuse_writing_onto`) and the bound of ``connectx export-onnx --check``
(:data:`MAX_CHECK_POSITIONS`), which its flags read without torch.
"""

from __future__ import annotations

import ast
import base64
import inspect
import os
from pathlib import Path

from connectx_gym import forward as forward_module
from connectx_gym import weights as weights_module
from connectx_gym.files import SHIPPED_WEIGHTS, load_file, shipped_weights
from connectx_gym.outputs import OutputPathError, check_output_path, write_text_atomically
from connectx_gym.weights import WeightsFile, weights_bytes
from connectx_train.sb3_files import GEOMETRY_ATTRIBUTE, weights_from_sb3

__all__ = [
    "GEOMETRY_ATTRIBUTE",
    "MAX_CHECK_POSITIONS",
    "export_kaggle",
    "kaggle_source",
    "model_file",
    "module_body",
    "refuse_writing_onto",
    "weights_from_sb3",
]

#: The most positions ``connectx export-onnx --check`` draws (:mod:`connectx_train.onnx_export`):
# 100,000
#: positions of the largest board are 0.1 GB of inputs, and minutes of drawing.
MAX_CHECK_POSITIONS = 100_000

_AGENT_SOURCE = '''
_NETWORK = read_weights(io.BytesIO(base64.b64decode(_WEIGHTS)), "embedded weights")
_BOARD = (_NETWORK.geometry.rows, _NETWORK.geometry.columns, _NETWORK.geometry.inarow)

try:
    from threadpoolctl import ThreadpoolController

    _BLAS = ThreadpoolController()
except ImportError:
    _BLAS = None


def _one_blas_thread():
    """A block in which numpy's BLAS uses one thread, where threadpoolctl imports (Kaggle's image
    has it): one move's products are too small for a second thread to pay, and a second thread
    that waits for a busy core makes the move several times slower."""
    if _BLAS is None:
        return contextlib.nullcontext()
    return _BLAS.limit(limits=1, user_api="blas")


def _setting(source, key):
    return source[key] if isinstance(source, dict) else getattr(source, key)


def agent(obs, config):
    """The legal column with the highest logit for the player to move."""
    rows, columns = int(_setting(config, "rows")), int(_setting(config, "columns"))
    if (rows, columns, int(_setting(config, "inarow"))) != _BOARD:
        raise ValueError(f"this agent was trained on another board size: {_BOARD}")
    grid = np.asarray(_setting(obs, "board"), dtype=np.int64).reshape(rows, columns)
    mark = int(_setting(obs, "mark"))
    planes = np.stack([grid == mark, grid == 3 - mark])
    legal = grid[0] == 0
    with _one_blas_thread():
        logits = masked_logits(_NETWORK.layers, _NETWORK.params, planes, legal, _NETWORK.kernels)
    return best_legal_column(logits, legal)
'''


def module_body(module: object, drop_imports: tuple[str, ...] = ()) -> str:
    """``module``'s source without its docstring and its ``from`` imports of ``drop_imports``."""
    source = inspect.getsource(module)  # type: ignore[arg-type]
    skipped: set[int] = set()
    body = ast.parse(source).body
    for node in body:
        docstring = node is body[0] and isinstance(node, ast.Expr)
        if docstring or (isinstance(node, ast.ImportFrom) and node.module in drop_imports):
            skipped.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    lines = source.splitlines(keepends=True)
    return "".join(line for number, line in enumerate(lines) if number not in skipped).strip()


def kaggle_source(weights: WeightsFile) -> str:
    """The text of a self-contained Kaggle agent file playing ``weights``."""
    encoded = base64.b64encode(weights_bytes(weights)).decode("ascii")
    g = weights.geometry
    # forward's source, then weights' without the imports that the file already holds
    body = (
        module_body(forward_module)
        + "\n\n\n"
        + module_body(weights_module, ("__future__", "connectx_gym.forward"))
    )
    header = (
        f'"""ConnectX agent exported by connectx-gym: a policy network for {g.rows}x{g.columns}, '
        f"{g.inarow} in a row.\n\nSelf-contained: numpy only, weights embedded (weights-only "
        ".npz, base64), read and run by the source of connectx_gym.forward and "
        'connectx_gym.weights below. Plays the legal column with the highest logit.\n"""\n\n'
    )
    wrapped = "\n".join(encoded[i : i + 96] for i in range(0, len(encoded), 96))
    imports = "import base64\nimport contextlib\n\n"
    return (
        f'{header}{body}\n\n\n{imports}_WEIGHTS = """\n{wrapped}\n"""\n\n{_AGENT_SOURCE.lstrip()}'
    )


def model_file(model: str | Path) -> Path:
    """The file an export reads for ``model``: the name of shipped weights (such as ``"ppo"``,
    :data:`connectx_gym.files.SHIPPED_WEIGHTS`), a ``.npz`` weights file or an SB3 ``.zip``."""
    if str(model) in SHIPPED_WEIGHTS:
        return shipped_weights(str(model))
    model = Path(model)
    if model.suffix.lower() not in (".npz", ".zip"):
        shipped = ", ".join(SHIPPED_WEIGHTS)
        raise ValueError(
            f"cannot export {model}: expected a .npz weights file or an SB3 .zip, or the name "
            f"of shipped weights ({shipped})"
        )
    return model


def refuse_writing_onto(source: Path, output: Path) -> None:
    """:class:`~connectx_gym.outputs.OutputPathError` when ``output`` is the file ``source``: the
    same path once resolved, or the same file by another name (a link, hard or symbolic, to it),
    which an export would replace by its result."""
    try:
        same = os.path.samefile(source, output)
    except OSError:  # one of them does not exist (yet)
        same = False
    if same or source.resolve() == output.resolve():
        raise OutputPathError(
            f"refusing to write {output}: it is the model being exported ({source}), which it "
            "would destroy; give another output file"
        )


def export_kaggle(model: str | Path, output: str | Path = "main.py") -> Path:
    """Write the Kaggle agent file for ``model`` (a ``.npz`` weights file, an SB3 ``.zip`` or the
    name of shipped weights, such as ``"ppo"``; a search with its network:
    :func:`connectx_train.kaggle_search.export_search`)."""
    output = check_output_path(output)  # before the work: a bad path fails at once
    source = model_file(model)
    refuse_writing_onto(source, output)  # the model's own file, by any name
    weights = load_file(source)
    return write_text_atomically(output, kaggle_source(weights))
