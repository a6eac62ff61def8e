"""Which device evaluation and transcription run on: ``device=auto|cpu|cuda[:N]``.

``auto`` (the default of ``evaluate.py``, ``transcribe.py`` and the evaluation after
``train.py``) is CUDA when torch sees a GPU, else the CPU, so a run trained on a GPU node is
also evaluated there. Asking for ``cuda`` where torch sees none is one clear error, not a
fallback: a silent CPU evaluation of a 20-minute talk would take hours instead of seconds.
"""

from __future__ import annotations

import platform
import re

import torch

from asr_pe.errors import UserError

DEVICE_CHOICES = ("auto", "cpu", "cuda")


class DeviceError(UserError, ValueError):
    """A ``device`` setting that is not auto/cpu/cuda[:N], or a GPU that torch cannot use."""


def resolve_device(spec: str | torch.device | None = "auto") -> str:
    """``"auto"`` / None -> ``"cuda"`` when ``torch.cuda.is_available()``, else ``"cpu"``;
    ``"cpu"``; ``"cuda"`` / ``"cuda:N"`` -> itself when that GPU exists, else DeviceError."""
    text = "auto" if spec is None else str(spec).strip().lower()
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if text == "cpu":
        return "cpu"
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if match is None:
        raise DeviceError(f"device={spec!r}: choose auto, cpu, cuda or cuda:<index>")
    if not torch.cuda.is_available():
        raise DeviceError(
            f"device={text}: torch sees no CUDA GPU (torch.cuda.is_available() is False; torch "
            f"{torch.__version__}, built for CUDA {torch.version.cuda}: no GPU, or an NVIDIA driver "
            "too old for this build, see README 'GPU / CUDA driver'); use device=auto or device=cpu")
    if match.group(1) is not None and int(match.group(1)) >= torch.cuda.device_count():
        raise DeviceError(
            f"device={text}: only {torch.cuda.device_count()} CUDA GPU(s) visible "
            "(indices start at 0; CUDA_VISIBLE_DEVICES renumbers them)")
    return text


def machine_record(device: str | torch.device = "cpu") -> dict:
    """What a run's floating-point results depend on besides its code and config: the CPU, the
    vector instructions torch's kernels dispatch to (``AVX512``, ``AVX2``, ...), the GPU when
    ``device`` is one, torch's version and its thread count. The same step on an AVX-512 and on an
    AVX2 machine rounds differently (a Transformer layer's weights differ after 3 steps, measured
    2026-12-02 with ``ATEN_CPU_CAPABILITY=avx2``), and over a training the runs drift apart: a
    retrain on another machine is another sample of its recipe, not the same run."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    record = {"cpu": cpu, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
              "threads": torch.get_num_threads()}
    if torch.device(device).type == "cuda":
        record["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return record


__all__ = ["DEVICE_CHOICES", "DeviceError", "machine_record", "resolve_device"]
