"""``--precision auto`` and ``--device`` resolved on this machine (run_setup), with the
CPU's and GPU's checks patched both ways, and the device plumbing of a run on the CPU: ``--device
cpu`` gives the default run's weights, the report names the device and the reason for the number
format, a resumed run may change device, ``--device cuda`` without a GPU is a one-line error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

pytest.importorskip("sb3_contrib")

import torch

from connectx_train import model as learner
from connectx_train import networks, run_setup
from connectx_train.config import TrainConfig
from connectx_train.run_setup import choose_precision, resolve_device
from connectx_train.teacher import TeacherTensors
from connectx_train.teaching import teaching_settings
from connectx_train.trainer import train
from tests.train.test_train_resume import arrays, quiet, tiny

SMALL_BOARD = {"rows": 4, "columns": 5, "inarow": 3}

ROOT = Path(__file__).resolve().parents[2]


#: The architectures whose bfloat16 instructions run_setup.bf16_native reads.
X86 = ("x86_64", "x86", "AMD64")


def cpu_flags(monkeypatch: pytest.MonkeyPatch, avx512_bf16: bool, amx: bool) -> None:
    """This CPU, as torch describes it (its capabilities, and the private checks of a torch
    without them), made to have (or lack) bfloat16 instructions; oneDNN's own check says yes
    throughout, as it does on plain AVX-512 (it must not decide)."""
    capabilities = MappingProxyType(
        {"architecture": "x86_64", "avx512_bf16": avx512_bf16, "amx_tile": amx, "amx_bf16": amx}
    )
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)


@pytest.mark.parametrize(("avx512_bf16", "amx"), [(False, False), (True, False), (False, True)])
def test_a_torch_without_get_capabilities_asks_its_private_checks(
    monkeypatch: pytest.MonkeyPatch, avx512_bf16: bool, amx: bool
) -> None:
    cpu_flags(monkeypatch, not avx512_bf16, not amx)  # capabilities that would say otherwise
    monkeypatch.delattr(torch.cpu, "get_capabilities")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert run_setup.bf16_native() is (avx512_bf16 or amx)
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")  # and without those: no bf16
    assert run_setup.bf16_native() is False


def test_this_torch_tells_whether_the_cpu_has_bf16() -> None:
    """The installed torch offers the public capabilities, with the keys bf16_native reads, or
    the private checks it falls back on: a torch that drops both fails here rather than making
    every CPU one without bfloat16."""
    private = [
        getattr(torch.cpu, name, None)
        for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    ]
    if not hasattr(torch.cpu, "get_capabilities"):
        assert all(private), "torch.cpu has neither get_capabilities nor its private bf16 checks"
        return
    capabilities = torch.cpu.get_capabilities()
    if capabilities.get("architecture") not in X86:
        pytest.skip(f"not an x86 CPU ({capabilities.get('architecture')})")
    assert {"avx512_bf16", "amx_tile"} <= set(capabilities)
    if all(private):  # both ways agree on this machine
        assert run_setup.bf16_native() is bool(private[0]() or private[1]())


@pytest.mark.parametrize(("avx512_bf16", "amx"), [(True, False), (False, True), (True, True)])
def test_auto_takes_bf16_on_a_cpu_with_bf16_instructions(
    monkeypatch: pytest.MonkeyPatch, avx512_bf16: bool, amx: bool
) -> None:
    cpu_flags(monkeypatch, avx512_bf16, amx)
    choice = choose_precision("auto", "cpu")
    assert choice.bf16
    assert choice.number_format == "bfloat16"
    assert "has bfloat16 instructions" in choice.reason
    assert choose_precision("auto").bf16


def test_auto_keeps_fp32_on_a_cpu_that_would_emulate_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu_flags(monkeypatch, avx512_bf16=False, amx=False)
    choice = choose_precision("auto", "cpu")
    assert not choice.bf16
    assert choice.number_format == "float32"
    assert "no bfloat16 instructions" in choice.reason
    assert not choose_precision("auto").bf16
    # asked for explicitly, bf16 is still what runs, and the reason says it is emulated
    forced = choose_precision("bf16", "cpu")
    assert forced.bf16
    assert "emulated" in forced.reason
    assert choose_precision("fp32", "cpu") == run_setup.PrecisionChoice(False, "--precision fp32")


def test_auto_is_fp32_on_a_gpu_and_bf16_asked_for_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu_flags(monkeypatch, avx512_bf16=True, amx=True)  # the GPU's choice ignores the CPU
    choice = choose_precision("auto", "cuda")
    assert not choice.bf16
    assert "GPU" in choice.reason
    for native in (True, False):
        monkeypatch.setattr(
            torch.cuda, "is_bf16_supported", lambda including_emulation=True, answer=native: answer
        )
        forced = choose_precision("bf16", "cuda")
        assert forced.bf16
        assert ("emulated" in forced.reason) is not native
    with pytest.raises(ValueError, match="precision must be one of"):
        choose_precision("fp16", "cpu")


def test_auto_device_is_the_gpu_when_torch_sees_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"--device cuda: torch .* sees no GPU"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda"):
        resolve_device("tpu")


def test_device_is_validated() -> None:
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda, got 'gpu'"):
        TrainConfig(device="gpu").validate()
    assert TrainConfig().device == "auto"


def test_autocast_follows_the_device_of_the_observations(monkeypatch: pytest.MonkeyPatch) -> None:
    import gymnasium as gym
    import numpy as np

    seen: list[str] = []
    real_autocast = torch.autocast

    def autocast(device_type: str, **kwargs: object) -> torch.autocast:
        seen.append(device_type)
        return real_autocast(device_type, **kwargs)

    monkeypatch.setattr(networks.torch, "autocast", autocast)
    space = gym.spaces.Box(0, 1, (2, 6, 7), np.int8)
    net = networks.ConnectXCNN(space, channels=4, blocks=1, features_dim=8, bf16=True)
    net(torch.zeros(3, 2, 6, 7, dtype=torch.int8))
    assert seen == ["cpu"]


def test_teacher_tensors_move_only_when_elsewhere() -> None:
    data = TeacherTensors(
        torch.zeros(2, 2, 6, 7, dtype=torch.int8),
        torch.ones(2, 7, dtype=torch.bool),
        torch.zeros(2, 7, dtype=torch.bool),
        torch.zeros(2),
    )
    assert data.to(torch.device("cpu")) is data
    assert data.to(torch.device("meta")).values.device.type == "meta"


def test_device_is_a_setting_of_one_session() -> None:
    settings = teaching_settings(TrainConfig(device="cpu"))
    assert "device" not in settings
    assert settings == teaching_settings(TrainConfig(device="cuda"))


def test_a_cpu_run_equals_the_default_run_and_reports_its_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # auto: the CPU, here too
    lines: list[str] = []
    # on the small board: no shipped book covers it (the run teaches its own 20 positions only)
    teacher = {"teacher_positions": 20, "teacher_epochs": 2, "teacher_replay": 2, **SMALL_BOARD}
    default = train(tiny(tmp_path / "default", teacher_workers=1, **teacher), log=quiet)
    on_cpu = train(
        tiny(tmp_path / "cpu", device="cpu", teacher_workers=1, **teacher), log=lines.append
    )
    assert arrays(tmp_path / "cpu" / "final.npz") == arrays(tmp_path / "default" / "final.npz")
    assert on_cpu["evaluations"] == default["evaluations"]
    # the choice and its reason: said at the start, kept in the report
    reason = choose_precision("auto", "cpu").reason
    assert lines[0].startswith("device: cpu (")
    assert reason in lines[0]
    report = json.loads((tmp_path / "cpu" / "report.json").read_text())
    assert report["device"].startswith("cpu (")
    assert report["precision_reason"] == reason
    assert report["bf16"] is choose_precision("auto", "cpu").bf16
    assert reason in (tmp_path / "cpu" / "report.md").read_text()
    assert report["timing"]["labelling_seconds"] > 0
    assert report["timing"]["teaching_seconds"] > 0
    # a resumed run may name another device (here: auto, which is the CPU)
    again = train(
        tiny(tmp_path / "cpu", device="auto", resume=True, timesteps=512, teacher_workers=1,
             **teacher),
        log=quiet,
    )  # fmt: skip
    assert again["timesteps"] >= 512
    assert again["device"].startswith("cpu (")


def test_a_checkpoint_loads_onto_the_device_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SB3 maps the saved tensors onto ``device`` (a checkpoint saved on a GPU loads on a CPU):
    the device reaches it."""
    asked: list[object] = []
    real_load = learner.MaskablePPO.load

    def load(path: object, **kwargs: object) -> object:
        asked.append(kwargs["device"])
        return real_load(path, **kwargs)

    out = tmp_path / "run"
    train(tiny(out, device="cpu", timesteps=128), log=quiet)
    monkeypatch.setattr(learner.MaskablePPO, "load", load)
    from connectx_train.opponents import make_vec_env

    env = make_vec_env(tiny(out))
    model = learner.load_model(out / "checkpoint.zip", env, out, torch.device("cpu"))
    env.close()
    assert asked == [torch.device("cpu")]
    assert all(p.device.type == "cpu" for p in model.policy.parameters())


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_device_cuda_without_a_gpu_is_a_one_line_error(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = "import sys; from connectx_gym.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "train", "--device", "cuda", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    # the last line, and the only one of ours (stable-baselines3 may warn about gym before it)
    error = result.stderr.splitlines()[-1]
    assert error.startswith("connectx train: error: --device cuda: torch ")
    assert "sees no GPU" in error
    assert sum(line.startswith("connectx") for line in result.stderr.splitlines()) == 1
    assert not out.exists()  # refused before anything was made
