"""A hand-made run directory with a tiny random model, and the entry points run as the user
runs them (a subprocess each), for the tests of input errors and audio checks.

The run's corpus is ``builtins.dict`` (no manifests), so evaluate.py scores only the manifests
given as ``data.test=<path>``; a training run is pointed at a corpus module that does not exist,
so that reaching data preparation fails differently (exit 1, a traceback) from a check that
stops the run before it (exit 2, one ``error:`` line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import asr_pe.training  # noqa: F401  (registers the pe_label resolver)
from asr_pe.data.features import GlobalCMVN
from asr_pe.data.tokenizer import build_tokenizer
from asr_pe.inference.run_loading import model_config
from asr_pe.models.asr import build_asr_model, model_kwargs

ROOT = Path(__file__).resolve().parents[2]
TINY = ["frontend.channels=8", "encoder.d_model=32", "encoder.n_heads=4", "encoder.n_layers=1",
        "encoder.ffn_dim=64", "encoder.dropout=0.0", "loss=ctc", "eval.n_boot=20"]
# a corpus target that fails loudly (ImportError, exit 1) if a run gets as far as preparing data
NO_DATA = "data.corpus._target_=asr_pe.no_such_module.corpus"


def make_run(run: Path, overrides: list[str] = (), *, checkpoint: bytes | None = None) -> Path:
    """config.yaml, tokenizer, CMVN and checkpoints/best.ckpt (random weights, or ``checkpoint``'s bytes)."""
    run.mkdir(parents=True, exist_ok=True)
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[*TINY, *overrides])
    cfg.data.corpus = OmegaConf.create({"_target_": "builtins.dict"})
    OmegaConf.save(cfg, run / "config.yaml")
    tok = build_tokenizer("char", ["hello world", "the quick brown fox"], run)
    (run / "checkpoints").mkdir(exist_ok=True)
    ckpt = run / "checkpoints" / "best.ckpt"
    if checkpoint is None:
        torch.manual_seed(0)
        model = build_asr_model(**model_kwargs(model_config(cfg), tok.vocab_size))
        torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}, ckpt)
    else:
        ckpt.write_bytes(checkpoint)
    n_mel = int(cfg.data.features.num_mel_bins)
    GlobalCMVN(torch.zeros(n_mel), torch.ones(n_mel)).save(run / "cmvn.json")
    return run


def run_entry(script: str, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python <script> <args>`` from the repository, in ``cwd``, one thread."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("ASR_PE_DEBUG", None)
    return subprocess.run([sys.executable, str(ROOT / script), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout, check=False)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``error:`` line of a run that stopped on bad input (exit 2, no traceback)."""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return errors[0]
