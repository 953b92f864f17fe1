"""numba compilation of plain-integer functions and modules, imported only when first needed.

The rules in :mod:`connectx_gym.bitboard`, the batched env's kernels and the searches of the
layers above are written once, with integer arithmetic only, so the very same functions run on
Python integers (any board) or compiled by numba on ``int64`` (boards that fit in 64 bits):

* :func:`jit` compiles one function (``numba.njit(cache=True)``), once per process;
* :func:`jit_module` makes a second copy of a kernel module whose functions are compiled;
* :class:`Backend` picks the compiled copy or the plain module for a geometry, and pickles;
* :func:`plain` marks a function that numba compiles through an overload of its own (a clock).

Importing this module does not import numba; compiling does. A kernel may call kernels imported
from another module of its own package (their compiled copies are used). Avoid kernels that call
themselves: numba 0.68 can crash (segfault) loading a cached self-recursive function in a new
process, so searches keep their own stack.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import FunctionType, ModuleType
from typing import Any, TypeVar, cast

from connectx_gym.bitboard import Geometry

F = TypeVar("F", bound=Callable[..., Any])

#: Modules of the core whose functions every kernel module may call compiled.
COMPILED_SOURCES = ("connectx_gym.bitboard", "connectx_gym._dims")

#: numba's options for a kernel, and for a function marked by :func:`helper` (numba's own
#: ``_nrt`` option is not in its type hints).
KERNEL_OPTIONS: dict[str, Any] = {"nogil": True}
HELPER_OPTIONS: dict[str, Any] = {"_nrt": False, "forceinline": True}

_compiled: dict[Callable[..., Any], Any] = {}
_jit_modules: dict[str, ModuleType] = {}


def helper(function: F) -> F:
    """Mark ``function`` as a search helper, called once per node with the search's arrays:
    compiled into its callers by LLVM (``forceinline``) and without numba's reference counting
    (``_nrt=False``), so that it costs what its body costs (a plain call and the atomic updates
    of the arrays' counts cost the solver about a fifth of its time). Only for functions that
    allocate nothing; on Python integers it runs unchanged."""
    function.jit_helper = True  # type: ignore[attr-defined]
    return function


def parallel(function: F) -> F:
    """Mark ``function`` to be compiled with ``parallel=True``: its ``numba.prange`` loops are
    spread over numba's threads (``numba.set_num_threads``; by default the cores this process
    may use). Only for loops whose iterations are independent and long enough to repay starting
    the threads (tens of microseconds a call); on Python integers ``prange`` is ``range``."""
    function.jit_parallel = True  # type: ignore[attr-defined]
    return function


def plain(function: F) -> F:
    """Mark ``function`` as one that :func:`jit_module` leaves as it is: plain Python, with its
    compiled form registered with numba by its own module (``numba.extending.overload``)."""
    function.jit_plain = True  # type: ignore[attr-defined]
    return function


def jit(function: F) -> F:
    """``function`` compiled by ``numba.njit(cache=True, nogil=True)``, compiled once per
    process (without reference counting when marked by :func:`helper`, over threads when marked
    by :func:`parallel`). Kernels release the GIL while they run, so that a long search (an
    alpha-beta move of a second, a solver's chunk) does not stop the process's other threads,
    such as ``connectx serve`` answering other requests."""
    if function not in _compiled:
        import numba

        options = dict(KERNEL_OPTIONS)
        if getattr(function, "jit_helper", False):
            options = dict(HELPER_OPTIONS)
        if getattr(function, "jit_parallel", False):
            options["parallel"] = True
        _compiled[function] = numba.njit(cache=True, **options)(function)
    # a numba dispatcher is called with the arguments of the function it compiles
    return cast(F, _compiled[function])


def jit_module(name: str) -> ModuleType:
    """A second copy of module ``name`` whose functions, and the core's rules they call
    (:data:`COMPILED_SOURCES`), are numba-compiled; a function imported from another module of
    the same top-level package is that module's compiled copy. Globals that are not functions
    (constants, numpy arrays) are shared as is."""
    if name in _jit_modules:
        return _jit_modules[name]
    source = importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(f"{name}.__jit__", source.__file__)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load a second copy of {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(module.__name__, module)  # numba's cache finds functions by module
    spec.loader.exec_module(module)
    package = name.partition(".")[0] + "."
    for attribute, value in list(vars(module).items()):
        if not isinstance(value, FunctionType) or getattr(value, "jit_plain", False):
            continue
        home = value.__module__
        if home == module.__name__ or home in COMPILED_SOURCES:
            setattr(module, attribute, jit(value))
        elif home.startswith(package) and home != __name__ and not home.endswith(".__jit__"):
            setattr(module, attribute, getattr(jit_module(home), value.__name__))
    _jit_modules[name] = module
    return module


class Backend:
    """The kernels of module ``name`` for boards of ``geometry``: its numba-compiled copy when
    the board fits in 64 bits, else the module itself. Attributes are the module's.

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
