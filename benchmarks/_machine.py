"""The machine a benchmark ran on, for the first line of its output: CPU model, cores, native
bfloat16 and GPU, without importing torch (``connectx_train.run_setup.machine_summary`` is the
training runs' line, from torch's own checks)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from connectx_baselines._thread_choice import available_cores

__all__ = ["available_cores", "bfloat16_support", "cpu_model", "gpu_name", "machine_line"]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform``)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


def bfloat16_support() -> str:
    """Whether the CPU has native bfloat16 instructions (AVX512-BF16 or AMX), from its flags."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return "unknown (no /proc/cpuinfo)"
    flags = set()
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            break
    native = sorted(flags & {"avx512_bf16", "amx_bf16"})
    return f"native ({', '.join(native)})" if native else "none native (emulated)"


def gpu_name() -> str:
    """The GPUs ``nvidia-smi`` lists, or 'none'."""
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "none"
    return ", ".join(listed.splitlines()) or "none"


def machine_line() -> str:
    """``CPU: model, N cores available (M in all); bfloat16: ...; GPU: ...``."""
    return (
        f"CPU: {cpu_model()}, {available_cores()} cores available ({os.cpu_count()} in all); "
        f"bfloat16: {bfloat16_support()}; GPU: {gpu_name()}"
    )
