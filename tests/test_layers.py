"""The import contract: core (connectx_gym) <- search (baselines) <- training (train), no cycles.

Every import statement of the three packages is read from the source (module level *and* inside
functions: a lazy import crosses a layer as much as an eager one). The core names higher packages
only as ``"module:attr"`` strings (policies, file loaders, subcommands), which are not imports.
When import-linter is installed, its layers contract in ``pyproject.toml`` is run too.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Lower layers first: a package may import only itself and packages before it.
LAYERS = ("connectx_gym", "baselines", "train")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
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
    modules = {module_name(path): path for layer in LAYERS for path in (ROOT / layer).rglob("*.py")}
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
    return LAYERS.index(module.split(".")[0])


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
        "def f():\n    from train.export import export_kaggle\n    import baselines\n"
    )
    assert {"train.export", "baselines"} <= imports_of(source, "connectx_gym.probe")


def test_import_linter_contract() -> None:
    lint_imports = shutil.which("lint-imports")
    if lint_imports is None:
        pytest.skip("import-linter is not installed (pip install import-linter)")
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, not an installed copy
    completed = subprocess.run(
        [lint_imports], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
