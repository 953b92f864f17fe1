"""The import contract: core (connectx_gym) <- search (connectx_baselines, folder ``baselines/``) <-
training (connectx_train, folder ``train/``), no cycles.

Every import statement of the three packages is read from the source (module level *and* inside
functions: a lazy import crosses a layer as much as an eager one). A lower layer does not name a
higher one even in a string or a comment (a ``"module:attr"`` entry point is an import too): the
higher packages register what they provide through entry points (``connectx_gym.plugins``).
Modules import no circle, within a package or across. When import-linter is installed, its layers
contract in ``pyproject.toml`` is run too.
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Lower layers first, as (import name, folder): a package may import only itself and packages
#: before it.
LAYERS = (
    ("connectx_gym", "connectx_gym"),
    ("connectx_baselines", "baselines"),
    ("connectx_train", "train"),
)
PACKAGES = tuple(package for package, _ in LAYERS)
PACKAGE_OF_FOLDER = {folder: package for package, folder in LAYERS}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = PACKAGE_OF_FOLDER.get(parts[0], parts[0])
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str | None = None) -> set[str]:
    """Modules imported anywhere in the file (module ``name``), relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = module_name(path) if name is None else name
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    modules = {
        module_name(path): path for _, folder in LAYERS for path in (ROOT / folder).rglob("*.py")
    }
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imports_of(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


def layer_of(module: str) -> int:
    return PACKAGES.index(module.split(".")[0])


def test_no_layer_imports_a_higher_one() -> None:
    crossings = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    ]
    assert not crossings, "layer crossed:\n" + "\n".join(sorted(crossings))


def test_no_import_cycle_between_packages() -> None:
    packages = {
        (module.split(".")[0], target.split(".")[0])
        for module, targets in graph().items()
        for target in targets
        if module.split(".")[0] != target.split(".")[0]
    }
    cycles = sorted(f"{a} <-> {b}" for a, b in packages if (b, a) in packages)
    assert not cycles, cycles


def test_graph_reader_sees_function_level_imports(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "def f():\n    from connectx_train.export import export_kaggle\n"
        "    import connectx_baselines\n"
    )
    found = imports_of(source, "connectx_gym.probe")
    assert {"connectx_train.export", "connectx_baselines"} <= found


def test_import_linter_contract() -> None:
    lint_imports = shutil.which("lint-imports")
    if lint_imports is None:
        pytest.skip("import-linter is not installed (pip install import-linter)")
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, not an installed copy
    completed = subprocess.run(
        [lint_imports], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def higher_layer_names(path: Path, layer: int) -> list[str]:
    """``file:line: text`` of every string or comment of ``path`` that names a package above
    ``layer`` (``connectx_baselines``, ``connectx_train.sb3_files``, ``:mod:`connectx_train```)."""
    patterns = [re.compile(rf"\b{name}\b") for name in PACKAGES[layer + 1 :]]
    found = []
    strings = (tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1))
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type not in strings:
            continue
        for pattern in patterns:
            match = pattern.search(token.string)
            if match:
                line = token.start[0] + token.string[: match.start()].count("\n")
                found.append(f"{path.name}:{line}: {match.group()}")
    return found


def test_no_layer_names_a_higher_one_even_in_strings() -> None:
    named = [
        f"{path.parent.relative_to(ROOT)}/{hit}"
        for layer, (_, folder) in enumerate(LAYERS)
        for path in sorted((ROOT / folder).rglob("*.py"))
        for hit in higher_layer_names(path, layer)
    ]
    assert not named, "a higher layer named:\n" + "\n".join(named)


def test_string_reader_sees_entry_points_and_docstrings(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        '"""Uses :mod:`connectx_baselines`."""\n'
        'LOADER = "connectx_train.sb3_files:weights_from_sb3"\n'
        'HELP = "train a MaskablePPO agent"  # run connectx train, pip install "x[train]"\n'
    )
    hits = higher_layer_names(source, 0)
    assert hits == ["probe.py:1: connectx_baselines", "probe.py:2: connectx_train"], hits


def module_cycles() -> list[list[str]]:
    """The import circles between modules (strongly connected components of more than one
    module, or a module importing itself), found with Tarjan's algorithm."""
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return cycles


@pytest.mark.slow
def test_no_import_circle_between_modules() -> None:
    cycles = module_cycles()
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
