"""`make install`'s torch build: CPU=1 is one switch to PyTorch's CPU index, and a machine without an
NVIDIA driver is told so before PyPI's CUDA 13 wheel (~3 GB of CUDA libraries) is fetched.

No download happens here: `make -n` prints the commands, and the one real `make install` runs with
a stand-in venv interpreter that only records its arguments.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("make"), "-C", str(REPO), "--no-print-directory", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def _pip_lines(out: str) -> list[str]:
    return [line.split("pip install -q ", 1)[1] for line in out.splitlines() if "pip install -q " in line]


def test_cpu_1_takes_torch_from_the_cpu_index_and_torch_pin_still_wins(tmp_path):
    venv = f"VENV={tmp_path}/venv"
    default = _pip_lines(_make("-n", "-B", "install", venv).stdout)
    assert default == ["torch==2.14.1 torchaudio==2.11.0", "-e '.[dev]'"]  # PyPI: the CUDA 13 build
    cpu = _pip_lines(_make("-n", "-B", "install", venv, "CPU=1").stdout)
    assert cpu == [f"torch==2.14.1 torchaudio==2.11.0 {CPU_INDEX}", "-e '.[dev]'"]
    own = _pip_lines(_make("-n", "-B", "install", venv, "CPU=1", "TORCH_PIN=torch==2.14.1+cu126").stdout)
    assert own[0] == "torch==2.14.1+cu126"


def _fake_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv whose python records each call and does nothing (no download)."""
    venv, calls = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    py.chmod(0o755)
    return venv, calls


@pytest.mark.skipif(Path("/proc/driver/nvidia/version").exists(), reason="this machine has an NVIDIA driver")
def test_a_machine_without_an_nvidia_driver_gets_the_hint_and_cpu_1_does_not(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with make's tools but no nvidia-smi
    bin_dir.mkdir()
    for tool in ("sh", "uname", "touch", "test", "["):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bin_dir / tool)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    venv, calls = _fake_venv(tmp_path)
    proc = _make("-B", "install", f"VENV={venv}", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "note: no NVIDIA driver found" in proc.stdout and "make install CPU=1" in proc.stdout
    proc = _make("-B", "install", f"VENV={venv}", "CPU=1", env=env)
    assert proc.returncode == 0 and "NVIDIA" not in proc.stdout
    assert calls.read_text().splitlines()[-2] == f"-m pip install -q torch==2.14.1 torchaudio==2.11.0 {CPU_INDEX}"
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n")  # a driver: no hint
    (bin_dir / "nvidia-smi").chmod(0o755)
    assert "NVIDIA" not in _make("-B", "install", f"VENV={venv}", env=env).stdout
