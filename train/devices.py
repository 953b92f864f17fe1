"""Where a run's network computes (``--device``) and in which number format (``--precision``),
resolved on this machine with the reason, and the machine described beside every timing.

``--precision auto`` takes bfloat16 only where it is native:

- on a CPU with bfloat16 instructions, AVX512-BF16 or AMX (``torch.cpu._is_avx512_bf16_supported``,
  ``torch.cpu._is_amx_tile_supported``). oneDNN's own check (``_is_mkldnn_bf16_supported``) also
  answers yes on plain AVX-512, where bfloat16 is emulated: one forward and backward pass of the
  default network took 2.5 times as long as in float32 on such a CPU;
- never on a GPU: the network is small (64 channels on 6x7 boards, batches of 256), so the GPU
  waits on kernel launches rather than on arithmetic, and autocast adds a cast before every
  convolution and matrix product. Float32 also keeps the GPU's updates closest to the CPU's and
  to the float32 export. ``--precision bf16`` still asks for it (``benchmarks/gpu_check.py``
  times both).

Passes without gradients (rollouts, predict, evaluation) are float32 everywhere
(:class:`connectx_train.networks.ConnectXCNN`).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import torch

__all__ = [
    "PrecisionChoice",
    "bf16_native",
    "choose_precision",
    "cpu_model",
    "describe_device",
    "gpu_name",
    "machine_summary",
    "resolve_device",
    "use_bf16",
]


@dataclass(frozen=True)
class PrecisionChoice:
    """``--precision`` resolved for one device: bfloat16 products or not, and why."""

    bf16: bool
    reason: str

    @property
    def number_format(self) -> str:
        """``"bfloat16"`` or ``"float32"``."""
        return "bfloat16" if self.bf16 else "float32"


def bf16_native() -> bool:
    """Whether this CPU has bfloat16 instructions: AVX512-BF16 or AMX."""
    try:
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


def use_bf16(precision: str, device: str | torch.device = "cpu") -> bool:
    """Whether ``--precision`` means bfloat16 products on ``device`` (:func:`choose_precision`)."""
    return choose_precision(precision, device).bf16


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


def gpu_name() -> str:
    """The first GPU torch sees, or ``"none"``."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"


def describe_device(device: str | torch.device) -> str:
    """``"cpu (model, N cores)"`` or ``"cuda (GPU name)"``."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({cpu_model()}, {os.cpu_count()} cores)"


def machine_summary() -> str:
    """One line for timings: CPU model, cores, its bfloat16 support, the GPU, torch's version."""
    bf16 = "native bfloat16" if bf16_native() else "no native bfloat16"
    return (
        f"CPU {cpu_model()}, {os.cpu_count()} cores, {bf16}; GPU {gpu_name()}; "
        f"torch {torch.__version__}"
    )
