"""What installed packages add to connectx-gym: policies, ``connectx`` subcommands, file loaders.

A package declares them as entry points in its ``pyproject.toml``; the core finds them with
:func:`importlib.metadata.entry_points` and imports one only when it is used, so it names no
package above it::

    [project.entry-points."connectx_gym.policies"]     # make_policy("mine"), opponent="mine"
    mine = "my_package.agents:MyPolicy"                # a factory returning a Policy

    [project.entry-points."connectx_gym.commands"]     # connectx hello ...
    hello = "my_package.hello"                         # a module: add_arguments(parser), run(args)

    [project.entry-points."connectx_gym.loaders"]      # make_policy("agent.ext")
    ".ext" = "my_package.files:load"                   # loader(path) -> WeightsFile | agent

The search agents and the training commands of this distribution come the same way (see its
``pyproject.toml``). Entry points appear when the distribution is installed (``pip install -e .``
again after adding one). A command's one-line help is its module's ``HELP`` string, read from the
source without importing the module, so ``connectx --help`` imports none of them.

:func:`load_entry_point` is the one place that imports what a ``"module:attr"`` string (a policy,
a batch actor, a file loader registered in code) or an installed entry point names;
:func:`check_entry_point` checks such a string's form when it is registered.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.util
from importlib.metadata import EntryPoint, distributions
from typing import Any

__all__ = [
    "COMMANDS_GROUP",
    "LOADERS_GROUP",
    "POLICIES_GROUP",
    "check_entry_point",
    "command_help",
    "load_entry_point",
    "plugins",
    "provider",
]

POLICIES_GROUP = "connectx_gym.policies"
COMMANDS_GROUP = "connectx_gym.commands"
LOADERS_GROUP = "connectx_gym.loaders"


def plugins(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` (one of the three above) by name; the first distribution on
    ``sys.path`` that declares a name wins, as for modules."""
    return _scan().get(group, {})


@functools.cache
def _scan() -> dict[str, dict[str, EntryPoint]]:
    """The three groups, found in one pass over the installed distributions (once per process).

    Only the distributions whose ``entry_points.txt`` mentions a group are parsed: with a few
    hundred installed that is half the time of :func:`importlib.metadata.entry_points`, which
    ``connectx --help`` pays on every run.
    """
    groups: dict[str, dict[str, EntryPoint]] = {}
    for distribution in distributions():
        text = distribution.read_text("entry_points.txt")
        if not text or "connectx_gym." not in text:
            continue
        for entry in distribution.entry_points:
            if entry.group in (POLICIES_GROUP, COMMANDS_GROUP, LOADERS_GROUP):
                groups.setdefault(entry.group, {}).setdefault(entry.name, entry)
    return groups


def provider(entry: EntryPoint) -> str:
    """The name of the distribution that declares ``entry`` (for error messages)."""
    return entry.dist.name if entry.dist is not None else entry.module.split(".")[0]


def check_entry_point(entry_point: str, what: str) -> None:
    """Refuse, with a ``ValueError`` naming ``what``, a string that is not ``"module:attr"`` (a
    dotted module name, one colon, an attribute name)."""
    module_name, colon, attribute = entry_point.partition(":")
    names = [*module_name.split("."), attribute]
    if not colon or ":" in attribute or not all(name.isidentifier() for name in names):
        raise ValueError(f"entry point of {what} must look like 'module:attr', got {entry_point!r}")


def load_entry_point(entry_point: str | EntryPoint, what: str) -> Any:
    """What ``entry_point`` names, imported now: ``"module:attr"`` (or an installed entry point)
    gives the attribute, ``"module"`` the module itself.

    Raises an ``ImportError`` of one line naming ``what`` (e.g. ``"policy 'minimax'"``), the entry
    point, the package that declares it and the reason when the module cannot be imported or has
    no such attribute.
    """
    if isinstance(entry_point, EntryPoint):
        text, declared = entry_point.value, f" (declared by {provider(entry_point)})"
        module_name, attribute = entry_point.module, entry_point.attr
    else:
        text, declared = entry_point, ""
        module_name, _, attribute = entry_point.partition(":")

    def failure(reason: str) -> ImportError:
        return ImportError(f"cannot load {what}: entry point {text!r}{declared} {reason}")

    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise failure(f"cannot be imported: {' '.join(str(error).split())}") from None
    for name in attribute.split(".") if attribute else []:
        try:
            found = getattr(found, name)
        except AttributeError:
            raise failure(f"not found: {module_name} has no attribute {attribute}") from None
    return found


@functools.cache
def command_help(module_name: str) -> str:
    """The ``HELP`` string of module ``module_name``, read from its source without importing it
    (nor the packages above it): the literal of its top-level line ``HELP = "..."``; "" when it
    has none or its source cannot be read."""
    try:
        source_file = _source_file(module_name)
        if source_file is None:
            return ""
        with open(source_file, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("HELP = "):
                    value = ast.literal_eval(line.removeprefix("HELP = ").strip())
                    return value if isinstance(value, str) else ""
    except (OSError, SyntaxError, ValueError, ImportError):
        return ""
    return ""


def _source_file(module_name: str) -> str | None:
    """The source file of ``module_name``: the top package through the import system's finders
    (editable installs included), the submodules through the package folders (nothing runs)."""
    parts = module_name.split(".")
    spec = importlib.util.find_spec(parts[0])  # a top-level name: imports nothing
    for depth in range(1, len(parts)):
        if spec is None or spec.submodule_search_locations is None:
            return None
        name = ".".join(parts[: depth + 1])
        spec = importlib.machinery.PathFinder.find_spec(name, spec.submodule_search_locations)
    if spec is None or not isinstance(spec.origin, str) or not spec.origin.endswith(".py"):
        return None
    return spec.origin
