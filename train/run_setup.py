"""A run's setup, resolved once on this machine: where the network computes (``--device``), in
which number format (``--precision``), on how many threads, with which time budget, and what a
stop signal does. :func:`resolve_setup` makes the one :class:`RunSetup` that the rest of the run
receives; the run also holds its output folder's lock (:func:`run_lock`) and its signal handling
(:class:`StopSignals`) for its whole life.

``--precision auto`` takes bfloat16 only where it is native:

- on a CPU with bfloat16 instructions, AVX512-BF16 or AMX (``torch.cpu.get_capabilities()``; on
  a torch without it, ``torch.cpu._is_avx512_bf16_supported`` and ``_is_amx_tile_supported``).
  oneDNN's own check (``_is_mkldnn_bf16_supported``) also answers yes on plain AVX-512, where
  bfloat16 is emulated and slower than float32;
- never on a GPU: the network is small, so the GPU waits on kernel launches rather than on
  arithmetic, and autocast adds a cast before every convolution and matrix product. Float32 also
  keeps the GPU's updates closest to the CPU's and to the float32 export. ``--precision bf16``
  still asks for it (``benchmarks/gpu_check.py`` times both).

Passes without gradients (rollouts, predict, evaluation) are float32 everywhere
(:class:`connectx_train.networks.ConnectXCNN`).

The lock is ``flock`` (``fcntl``) on Linux and macOS, the ``filelock`` library's lock elsewhere:
either way the operating system drops it when the process ends, however it ends (SIGKILL
included), so a crashed run never leaves a stale lock behind. The file ``run.lock`` stays; it
holds the process id of the run that last took it, which the refusal names.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import torch
from threadpoolctl import threadpool_limits

from connectx_train.budget import Budget
from connectx_train.config import TrainConfig
from connectx_train.state import SessionClock

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TIME_LIMIT",
    "LOCK_FILE",
    "PrecisionChoice",
    "RunInterruptedError",
    "RunLockedError",
    "RunSetup",
    "StopSignals",
    "bf16_native",
    "busy_machine_hint",
    "choose_precision",
    "cpu_model",
    "describe_device",
    "interrupted",
    "machine_summary",
    "prepare_out",
    "resolve_device",
    "resolve_setup",
    "run_lock",
    "thread_pools",
    "time_stop",
]

#: the lock file, in the run's output directory
LOCK_FILE = "run.lock"
#: exit status of a run stopped by a signal (as a shell reports Ctrl-C) and by --max-minutes
#: before its first checkpoint (EX_TEMPFAIL: run it again to go on)
EXIT_INTERRUPTED, EXIT_TIME_LIMIT = 130, 75
#: signals that make a run save what it has done and stop (SIGTERM: what schedulers send)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class PrecisionChoice:
    """``--precision`` resolved for one device: bfloat16 products or not, and why."""

    bf16: bool
    reason: str

    @property
    def number_format(self) -> str:
        """``"bfloat16"`` or ``"float32"``."""
        return "bfloat16" if self.bf16 else "float32"


@dataclass(frozen=True)
class RunSetup:
    """What one session of a run resolved once on this machine; everything else receives it."""

    config: TrainConfig
    out: Path
    device: torch.device
    precision: PrecisionChoice
    #: torch's threads in this session (``--torch-threads``, or torch's default for 0)
    torch_threads: int
    #: this session's clock and its share of ``--max-minutes``
    clock: SessionClock
    budget: Budget

    def describe(self) -> str:
        """The log line that says where and how the network computes."""
        return (
            f"device: {describe_device(self.device)}; network products in "
            f"{self.precision.number_format} ({self.precision.reason})"
        )


def resolve_setup(config: TrainConfig) -> RunSetup:
    """The setup of ``config`` on this machine; its session clock starts now. ``ValueError`` (one
    line) for a device this machine does not have, before any work."""
    device = resolve_device(config.device)
    clock = SessionClock()
    return RunSetup(
        config=config,
        out=Path(config.out),
        device=device,
        precision=choose_precision(config.precision, device),
        torch_threads=config.torch_threads or torch.get_num_threads(),
        clock=clock,
        budget=Budget.from_minutes(clock, config.max_minutes),
    )


# --- device and number format -----------------------------------------------------------------


def bf16_native() -> bool:
    """Whether this CPU has bfloat16 instructions: AVX512-BF16 or AMX."""
    get_capabilities = getattr(torch.cpu, "get_capabilities", None)
    if get_capabilities is not None:
        capabilities = get_capabilities()
        return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_tile"))
    try:  # a torch without get_capabilities: its private checks
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # a torch without these checks
        return False


def resolve_device(name: str) -> torch.device:
    """``--device`` on this machine: ``"auto"`` is the GPU when torch sees one, else the CPU.

    Raises ``ValueError`` (one line) for ``"cuda"`` when torch sees no GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        build = "built without CUDA" if torch.version.cuda is None else "no GPU visible"
        raise ValueError(
            f"--device cuda: torch {torch.__version__} sees no GPU ({build}); "
            "use --device cpu or --device auto"
        )
    if name not in ("cpu", "cuda"):
        raise ValueError(f"device must be one of auto, cpu, cuda, got {name!r}")
    return torch.device(name)


def choose_precision(precision: str, device: str | torch.device = "cpu") -> PrecisionChoice:
    """``--precision`` (auto, bf16 or fp32) on ``device``, with the reason (module docstring)."""
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    if precision == "fp32":
        return PrecisionChoice(False, "--precision fp32")
    if precision == "bf16":
        if on_gpu:
            native, where = torch.cuda.is_bf16_supported(including_emulation=False), "GPU"
        else:
            native, where = bf16_native(), "CPU"
        note = "" if native else f" (emulated on this {where}: slower than float32)"
        return PrecisionChoice(True, f"--precision bf16{note}")
    if precision != "auto":
        raise ValueError(f"precision must be one of auto, bf16, fp32, got {precision!r}")
    if on_gpu:
        return PrecisionChoice(
            False,
            "--precision auto on a GPU: float32 (the small network keeps the GPU waiting on "
            "kernel launches, which bfloat16 would add to)",
        )
    if bf16_native():
        return PrecisionChoice(
            True, "--precision auto: this CPU has bfloat16 instructions (AVX512-BF16 or AMX)"
        )
    return PrecisionChoice(
        False,
        "--precision auto: this CPU has no bfloat16 instructions (AVX512-BF16 or AMX), "
        "where bfloat16 is emulated and slower",
    )


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``; else what :mod:`platform` knows)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_device(device: str | torch.device) -> str:
    """``"cpu (model, N cores)"`` or ``"cuda (GPU name)"``."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({cpu_model()}, {os.cpu_count()} cores)"


def machine_summary() -> str:
    """One line for timings: CPU model, cores, its bfloat16 support, the GPU, torch's version."""
    bf16 = "native bfloat16" if bf16_native() else "no native bfloat16"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    cores = f"{os.cpu_count()} cores"
    return f"CPU {cpu_model()}, {cores}, {bf16}; GPU {gpu}; torch {torch.__version__}"


# --- threads and machine load -----------------------------------------------------------------


@contextlib.contextmanager
def thread_pools(torch_threads: int) -> Iterator[None]:
    """Within the block, torch uses ``torch_threads`` threads (0: unchanged) and numpy's BLAS one.

    Self-play snapshots and the panel run numpy matrix products on small batches: with BLAS
    threads of their own they fight torch's idle OpenMP threads for the cores."""
    before = torch.get_num_threads()
    if torch_threads:
        torch.set_num_threads(torch_threads)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def cpu_times() -> tuple[int, int]:
    """All CPU time since boot and its idle part (idle and I/O wait), in ticks, from the first
    line of Linux's ``/proc/stat`` (user nice system idle iowait irq softirq steal ...)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return sum(fields), fields[3] + fields[4]


def busy_cores(seconds: float = 0.25) -> float | None:
    """Cores that other work keeps busy now: the busy share of all CPU time over ``seconds``
    (:func:`cpu_times`; time taken by the hypervisor counts as busy) times the core count. None
    where ``/proc/stat`` cannot be read (not Linux)."""
    try:
        total_before, idle_before = cpu_times()
        time.sleep(seconds)
        total_after, idle_after = cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    elapsed = total_after - total_before
    if elapsed <= 0:
        return None
    return (1 - (idle_after - idle_before) / elapsed) * (os.cpu_count() or 1)


def busy_machine_hint(torch_threads: int) -> str | None:
    """A line advising ``--torch-threads 1`` when other work already keeps the cores busy: under
    load, torch's threads wait for each other at every operation. Measured over a quarter of a
    second (:func:`busy_cores`), not by the load average, which stays high for a minute after a
    run stops; the load average where ``/proc/stat`` cannot be read."""
    cores = os.cpu_count() or 1
    if torch_threads <= 1:
        return None
    busy = busy_cores()
    if busy is not None:
        what = f"{busy:.1f} of {cores} cores in use by other work"
    elif hasattr(os, "getloadavg"):
        busy = os.getloadavg()[0]
        what = f"load average {busy:.1f} on {cores} cores"
    else:
        return None
    if busy < cores - 0.5:
        return None
    return (
        f"note: the machine is busy ({what}); torch's {torch_threads} threads wait for each "
        "other under load, --torch-threads 1 is faster then"
    )


# --- one run per output folder ----------------------------------------------------------------


class RunLockedError(OSError):
    """Another process holds the output folder's lock."""


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold the lock of ``out`` (created if needed) within the block; ``RunLockedError`` (one
    line, naming the holder's process id) when another process holds it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield from _filelock(path)
        return
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(_refusal(out, _holder(descriptor))) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _filelock(path: Path) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunLockedError(_refusal(path.parent, None)) from None
    try:
        yield
    finally:
        lock.release()


def _holder(descriptor: int) -> str | None:
    """The process id written by the lock's holder, if it reads as one."""
    with contextlib.suppress(OSError):
        text = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
        if text.isdigit():
            return text
    return None


def _refusal(out: Path, holder: str | None) -> str:
    who = f"another run (process {holder})" if holder else "another run"
    return (
        f"{out} is in use by {who}: one run per output folder; wait for it to end "
        "or choose another --out"
    )


# --- stop signals -----------------------------------------------------------------------------


class StopSignals:
    """Ctrl-C (SIGINT) and SIGTERM during a run (main thread only; a SIGINT that the process
    ignores, as in a shell's background job, stays ignored).

    While labelling and teaching a signal raises ``KeyboardInterrupt`` at once, as Ctrl-C does.
    From PPO on (:meth:`defer`) it is only noted, and the run stops at its next safe point
    (:meth:`check`: every env step, after each update, between panel opponents, after the
    report): a ``KeyboardInterrupt`` raised anywhere would also fire inside library code that
    turns it into another error (an extension module imported at that moment reports
    ``ImportError: initialization failed``), and the run would end without its resume hint.
    """

    def __init__(self) -> None:
        self.requested = False
        self.deferring = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in STOP_SIGNALS:
                if signal.getsignal(number) is not signal.SIG_IGN:
                    self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if not self.deferring:
            raise KeyboardInterrupt
        self.requested = True

    def defer(self) -> None:
        """From now on, a signal only asks the run to stop at its next :meth:`check`."""
        self.deferring = True

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if a signal asked the run to stop."""
        if self.requested:
            self.requested = False
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def ignored(self) -> Iterator[None]:
        """Within the block (the checkpoint saved on the way out), signals are ignored."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {number: signal.signal(number, signal.SIG_IGN) for number in STOP_SIGNALS}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


# --- the output folder, and how a stopped run says how to go on ---------------------------------


class RunInterruptedError(Exception):
    """Training stopped by Ctrl-C, SIGTERM or the time limit after saving what was done
    (``--resume`` or the same command goes on); ``exit_status`` is the command's."""

    def __init__(
        self,
        out: Path,
        timesteps: int,
        message: str | None = None,
        exit_status: int = EXIT_INTERRUPTED,
    ) -> None:
        super().__init__(
            message
            or f"interrupted at step {timesteps}: checkpoint saved in {out}; "
            f"continue with: connectx train --resume --out {out}"
        )
        self.out = out
        self.timesteps = timesteps
        self.exit_status = exit_status


def prepare_out(config: TrainConfig) -> bool:
    """Check the output directory (the caller holds its lock): whether the run goes on from a
    checkpoint. ``--resume`` of a folder without one goes on from what its last session saved
    (labelled chunks, teacher passes) when it holds the run's settings."""
    out = Path(config.out)
    has_checkpoint = (out / "checkpoint.zip").is_file() and (out / "state.json").is_file()
    if config.resume:
        if not has_checkpoint and not (out / "config.json").is_file():
            raise FileNotFoundError(f"nothing to resume: {out} has no checkpoint")
        return has_checkpoint
    if (out / "checkpoint.zip").exists() or (out / "final.zip").exists():
        raise FileExistsError(
            f"{out} already holds a run: continue it with --resume or choose another --out"
        )
    return False


def interrupted(out: Path, where: str, kept: str) -> RunInterruptedError:
    return RunInterruptedError(
        out,
        0,
        f"interrupted {where}; {kept}: run the same command again (or connectx train --resume "
        f"--out {out}) to go on",
    )


def time_stop(setup: RunSetup, where: str, kept: str) -> RunInterruptedError:
    out, limit = setup.out, setup.config.max_minutes
    return RunInterruptedError(
        out,
        0,
        f"stopped by the time limit (--max-minutes {limit:g}) {where}; {kept}: "
        f"run the same command again (or connectx train --resume --out {out}) to go on",
        exit_status=EXIT_TIME_LIMIT,
    )
