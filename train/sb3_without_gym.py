"""Keep SB3 from importing the unmaintained ``gym`` package (and printing its banner).

Stable-Baselines3 imports ``gym`` when it is installed (kaggle-environments brings it) only to
convert old gym envs, which connectx-gym never gives it, and to list its version in the
``system_info.txt`` of every saved model; the import prints gym's four-line "unmaintained" notice
on stderr, before every message of ``connectx train`` and the exports. :func:`install` makes
``gym`` unimportable while SB3's module that imports it (:data:`SB3_GYM_MODULE`) runs, and
:func:`without_gym` while a model is saved, and only then: SB3 takes gym as absent, and anything
else that imports ``gym`` still gets it. ``import connectx_train`` installs it, before anything
imports
SB3.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

__all__ = ["SB3_GYM_MODULE", "install", "without_gym"]

#: SB3's module that imports ``gym`` when it can
SB3_GYM_MODULE = "stable_baselines3.common.vec_env.patch_gym"


@contextlib.contextmanager
def without_gym() -> Iterator[None]:
    """A block in which ``import gym`` raises ``ImportError`` (unless gym was imported before)."""
    if "gym" in sys.modules:
        yield
        return
    sys.modules["gym"] = None  # type: ignore[assignment] - "import gym" raises ImportError
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


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once; nothing to do once SB3 is imported)."""
    if SB3_GYM_MODULE in sys.modules:
        return
    if not any(isinstance(finder, _SB3WithoutGym) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SB3WithoutGym())
