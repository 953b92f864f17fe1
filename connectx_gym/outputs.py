"""Files that connectx-gym writes: checked output paths and atomic writes, in one place.

Every file a command writes (``-o``/``--output``, ``--save-games``, ``--png``, the run's files in
``--out``) goes through :func:`atomic_output` or its shorthands: the data is written to a new
temporary file beside the target (``NAME.<pid>-<random>.tmp<suffix>``), flushed to disk, then
renamed onto the target, so a reader never sees half a file and a crash or a full disk never
leaves a damaged one: the temporary file is removed on any error (and the error names the
target), and one left by a killed writer is removed by the next write of the same target.

A rename replaces whatever the target names, so :func:`check_output_path` first refuses (one
line, :class:`OutputPathError`) a target that is not a regular file or a new name: a directory, a
device node, a FIFO or socket, or a **symbolic link** (renaming onto a link replaces the link, not
the file it points to; renaming onto ``/dev/null`` as root would replace the machine's
``/dev/null`` with a regular file). Give the file the link points to instead.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "OutputPathError",
    "atomic_output",
    "check_output_path",
    "open_atomically",
    "write_atomically",
    "write_text_atomically",
]


class OutputPathError(ValueError):
    """An output path that cannot be written safely (one line naming the path and why)."""


def _kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "not a regular file"


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a file may be written there atomically: a new name
    in an existing folder, or an existing regular file (replaced). Raises
    :class:`OutputPathError` for a directory, device, FIFO, socket or symbolic link, and for a
    folder that does not exist."""
    target = Path(path)
    if not str(path) or str(path).endswith(os.sep):
        raise OutputPathError(f"cannot write {str(path)!r}: expected a file name")
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise OutputPathError(f"cannot write {target}: {error.strerror}") from None
    kind = None if mode is None else _kind(mode)
    if kind == "a symbolic link":
        pointed = os.readlink(target)
        raise OutputPathError(
            f"refusing to write {target}: it is a symbolic link (to {pointed}), which would be "
            "replaced rather than written through; give the file it points to"
        )
    if kind is not None:
        raise OutputPathError(
            f"refusing to write {target}: it is {kind}, not a regular file; give a file name"
        )
    folder = target.parent
    if not folder.is_dir():
        raise OutputPathError(f"cannot write {target}: no folder {folder}")
    return target


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _remove_stale_temporaries(target: Path) -> None:
    """Remove the temporary files of ``target`` left by writers that were killed (``kill -9``
    gives no chance to clean up): those whose process id, in their name, no longer runs."""
    prefix = f"{target.name}."
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            pid, dash, _ = entry.name[len(prefix) :].partition("-")
            stale = entry.name.startswith(prefix) and dash and ".tmp" in entry.name
            if stale and pid.isdigit() and not _process_alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _new_temporary(target: Path, suffix: str) -> Path:
    """A new, empty file beside ``target`` (created here, so no other writer shares it), named
    ``NAME.<pid>-<random>.tmp<suffix>``."""
    _remove_stale_temporaries(target)
    while True:
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        temporary = target.with_name(f"{target.name}.{token}.tmp{suffix}")
        try:
            descriptor = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        os.close(descriptor)
        return temporary


#: Errors of writing itself, which name no file (a full disk, a quota, a failing drive)
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _named(error: OSError, target: Path, temporary: Path) -> OSError:
    """``error`` naming ``target`` where it names the temporary file or, for an error of writing
    itself, no file at all."""
    nameless = error.filename is None and error.errno in _WRITE_ERRORS
    if error.errno is None or not (nameless or str(error.filename) == str(temporary)):
        return error
    return type(error)(error.errno, error.strerror or str(error), str(target))


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], suffix: str | None = None) -> Iterator[Path]:
    """A temporary path to write; when the block ends without an error, that file (flushed to
    disk) replaces ``path``. On any error the temporary file is removed and ``path`` is left as
    it was; an ``OSError`` names ``path``. The temporary name ends with ``suffix`` (default:
    ``path``'s), for writers that pick the format by the file's suffix."""
    target = check_output_path(path)
    temporary = _new_temporary(target, target.suffix if suffix is None else suffix)
    try:
        yield temporary
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        check_output_path(target)  # nothing was put in its place meanwhile
        os.replace(temporary, target)
    except OSError as error:
        raise _named(error, target, temporary) from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def write_atomically(path: str | os.PathLike[str], write: Callable[[Path], Any]) -> Path:
    """Call ``write(temporary_path)``, then put the file in place of ``path`` (see
    :func:`atomic_output`); returns ``path``."""
    with atomic_output(path) as temporary:
        write(temporary)
    return Path(path)


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path``."""
    return write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


@contextlib.contextmanager
def open_atomically(
    path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8"
) -> Iterator[IO[Any]]:
    """An open file whose contents replace ``path`` when the block ends without an error
    (``mode`` ``"w"`` or ``"wb"``; see :func:`atomic_output`)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    with atomic_output(path) as temporary:
        if mode == "wb":
            with open(temporary, "wb") as file:
                yield file
        else:
            with open(temporary, "w", encoding=encoding) as file:
                yield file
