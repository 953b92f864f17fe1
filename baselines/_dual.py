"""One source, two backends: search modules run numba-compiled or on Python integers.

Search code in :mod:`baselines` is written once, as plain Python on integer bitboards. Boards
that fit in 64 bits (:attr:`connectx_gym.Geometry.fits_64_bits`, every usual size) run a copy of
the module whose functions are compiled by numba (``int64``, ``cache=True``); larger boards run
the module as it is, on Python's unbounded integers. :func:`backend` returns the right one, as a
picklable :class:`Backend`.

A kernel may call kernels imported from another ``baselines`` module (their compiled copies are
used). Avoid kernels that call themselves: numba 0.68 can crash (segfault) loading a cached
self-recursive function in a new process, so searches keep their own stack.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import FunctionType, ModuleType
from typing import Any

from connectx_gym._jit import jit
from connectx_gym.bitboard import Geometry

_COMPILED_SOURCES = ("connectx_gym.bitboard",)
_jit_modules: dict[str, ModuleType] = {}


def jit_module(name: str) -> ModuleType:
    """A second copy of module ``name`` whose functions, and the bitboard rules they call, are
    numba-compiled. Globals that are not functions (constants, numpy arrays) are shared as is."""
    if name in _jit_modules:
        return _jit_modules[name]
    source = importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(f"{name}.__jit__", source.__file__)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load a second copy of {name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for attribute, value in list(vars(module).items()):
        if not isinstance(value, FunctionType):
            continue
        home = value.__module__
        if home == module.__name__ or home in _COMPILED_SOURCES:
            setattr(module, attribute, jit(value))
        elif home.startswith("baselines.") and not home.endswith(".__jit__"):
            # A kernel imported from another search module: take its compiled copy, whose own
            # callees are compiled too.
            setattr(module, attribute, getattr(jit_module(home), value.__name__))
    _jit_modules[name] = module
    sys.modules.setdefault(module.__name__, module)
    return module


class Backend:
    """The kernels of search module ``name`` for boards of ``geometry``: its numba-compiled copy
    when the board fits in 64 bits, else the module itself. Attributes are the module's.

    A policy keeps one of these rather than the module, because a module cannot be pickled: a
    backend pickles (and deep-copies) as its name and geometry, and is rebuilt from them.
    """

    def __init__(self, name: str, geometry: Geometry) -> None:
        self.module_name = name
        self.geometry = geometry
        self.module = jit_module(name) if geometry.fits_64_bits else importlib.import_module(name)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") or "module" not in self.__dict__:
            raise AttributeError(attribute)
        value = getattr(self.module, attribute)
        setattr(self, attribute, value)  # later look-ups skip __getattr__
        return value

    def __reduce__(self) -> tuple[Any, ...]:
        return backend, (self.module_name, self.geometry)

    def __repr__(self) -> str:
        return f"Backend({self.module_name!r}, {self.geometry})"


def backend(name: str, geometry: Geometry) -> Backend:
    """The kernels of module ``name`` for ``geometry`` (see :class:`Backend`)."""
    return Backend(name, geometry)
