"""Step (a) of the GPU check: a corpus recipe's smoke run (``run.sh --smoke``, stages 0-6) on
official-layout fixture archives served from a ``file://`` mirror, with its CER per PE and test set.

    python -m asr_pe.bench.recipe_smoke --recipe librispeech --work DIR [--gpu] [--dry]

The archives are those of the recipes' own end-to-end tests (``tests/recipes/fixtures.py``:
audio that spells its transcript, so a small model learns to read it in 150 steps), with the
mirror's checksum list, so stage 0 downloads and verifies exactly as from OpenSLR. ``--gpu``:
``trainer=gpu`` (bf16-mixed) and ``device=cuda`` for the evaluation; ``--dry``: 3 training steps
of one PE (the CPU run of the check, which shows the stages run, not that a model learns).
Writes ``<work>/result.json`` (rows per PE and test set) when run.sh ends, and ``run.log``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from asr_pe.io import atomic_write_text

__all__ = ["RECIPES", "REPO", "recipe_args", "build_mirror", "collect", "run_smoke", "main"]

REPO = Path(__file__).resolve().parents[2]
RECIPES = ("librispeech", "tedlium3")
# The recipe tests' setting (tests/recipes/test_recipe_run_sh.py): enough steps for the spelled audio
STEPS, DRY_STEPS = 150, 3
# Top-level files every official LibriSpeech archive holds beside LibriSpeech/<part>/
LIBRISPEECH_TOP = {"SPEAKERS.TXT": ";ID |SEX| SUBSET |MINUTES| NAME\n", "CHAPTERS.TXT": ";ID |READER\n",
                   "BOOKS.TXT": ";ID |BOOK TITLE\n", "LICENSE.TXT": "CC BY 4.0\n", "README.TXT": "LibriSpeech ASR corpus\n"}


def _fixtures():
    """The recipe tests' fixture builders, loaded from the checkout by path: the check must serve
    the very archives the tests hold the recipes to (they are test code, not part of the package)."""
    path = REPO / "tests" / "recipes" / "fixtures.py"
    spec = importlib.util.spec_from_file_location("asr_pe_recipe_fixtures", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def build_mirror(recipe: str, mirror: Path) -> Path:
    """Write the recipe's archives and checksum list into ``mirror`` -> the checksum file."""
    import tarfile

    fx = _fixtures()
    src = mirror.parent / "src"
    mirror.mkdir(parents=True, exist_ok=True)
    if recipe == "librispeech":
        fx.make_librispeech_tree(src, fx.SMOKE_LIBRISPEECH_LAYOUT, seconds_per_char=0.07, spelled=True)
        lines = []
        for part in ("dev-clean", "test-clean"):
            for name, text in LIBRISPEECH_TOP.items():
                (src / "LibriSpeech" / name).write_text(text)
            archive = mirror / f"{part}.tar.gz"
            with tarfile.open(archive, "w:gz") as tar:
                for name in LIBRISPEECH_TOP:
                    tar.add(src / "LibriSpeech" / name, arcname=f"LibriSpeech/{name}")
                tar.add(src / "LibriSpeech" / part, arcname=f"LibriSpeech/{part}")
            lines.append(f"{hashlib.md5(archive.read_bytes()).hexdigest()}  {part}.tar.gz\n")
        sums = mirror / "md5sum.txt"
    else:
        fx.make_tedlium_tree(src, spelled=True)
        archive = fx.make_tedlium_archive(src, mirror)
        lines = [f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  {archive.name}\n"]
        sums = mirror / "sha256sum.txt"
    sums.write_text("".join(lines))
    return sums


def recipe_args(recipe: str, work: Path, mirror: Path, sums: Path, *, gpu: bool, dry: bool) -> tuple[list[str], list[str]]:
    """run.sh's command line -> (args, PEs). The PEs are the smoke run's own (none, cape); dry: none."""
    pes = ["none"] if dry else ["none", "cape"]
    extra = f"trainer.max_steps={DRY_STEPS if dry else STEPS} trainer.enable_progress_bar=false"
    if dry:  # every step's loss logged: the report's first and last loss exist after 3 steps too
        extra += " trainer.log_every_n_steps=1"
    if gpu:
        extra = "trainer=gpu " + extra
    args = ["bash", str(REPO / "recipes" / recipe / "run.sh"), "--work_dir", str(work / "work"),
            "--mirror", f"file://{mirror}", "--checksums", str(sums), "--pes", " ".join(pes), "--smoke"]
    if recipe == "librispeech":
        args += ["--train_parts", "dev-clean", "--dev_parts", "dev-clean", "--test_parts", "test-clean",
                 "--longform_durations", "[8]"]
    else:  # the fixture's dev talks are short: train on its train talks too (as the recipe test does);
        # the dev talk held out for validation stays out of training (run.sh stage 4: dev_fit, dev_heldout)
        args += ["--longform_durations", "[5]", "--train_splits", "train dev"]
    args += ["--extra", extra]
    if gpu:
        args += ["--eval_extra", "device=cuda"]
    return args, pes


def _first_last_loss(run: Path) -> tuple[float | None, float | None]:
    metrics = sorted(run.glob("logs/**/metrics.csv"))
    if not metrics:
        return None, None
    with open(metrics[0], newline="") as f:
        losses = [float(r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")]
    return (losses[0], losses[-1]) if losses else (None, None)


def collect(recipe: str, work: Path, pes: list[str]) -> list[dict]:
    """A row per PE and evaluated test set: CER/WER of bucket ``all``, the trainer's accelerator
    and precision (the run's config.yaml), the first and last training loss."""
    rows = []
    for pe in pes:
        run = work / "work" / "runs" / pe
        cfg = (run / "config.yaml").read_text() if (run / "config.yaml").exists() else ""
        trainer = {k: v.strip() for line in cfg.splitlines() if ":" in line
                   for k, v in [line.strip().split(":", 1)] if k in ("accelerator", "precision")}
        first, last = _first_last_loss(run)
        sets = sorted(p.parent.name for p in run.glob("eval/*/buckets.csv"))
        for s in sets or [None]:
            row = {"recipe": recipe, "pe": pe, "test_set": s or "-", "accelerator": trainer.get("accelerator", "-"),
                   "precision": trainer.get("precision", "-"), "loss_first": first, "loss_last": last}
            if s is not None:
                with open(run / "eval" / s / "buckets.csv", newline="") as f:
                    all_row = next(r for r in csv.DictReader(f) if r["bucket"] == "all")
                row.update(cer=float(all_row["cer"]), wer=float(all_row["wer"]), utterances=int(all_row["utterances"]))
            rows.append(row)
    return rows


def run_smoke(recipe: str, work: str | Path, *, gpu: bool, dry: bool) -> dict:
    """Build the mirror, run the recipe's smoke run, collect its rows into ``<work>/result.json``."""
    assert recipe in RECIPES, f"recipe {recipe!r}: choose one of {RECIPES}"
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    sums = build_mirror(recipe, work / "mirror")
    args, pes = recipe_args(recipe, work, work / "mirror", sums, gpu=gpu, dry=dry)
    env = {**os.environ, "PYTHON": sys.executable}  # the stages run in this interpreter
    with open(work / "run.log", "w") as log:
        rc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
    result = {"recipe": recipe, "command": " ".join(args), "exit": rc, "seconds": round(time.time() - t0, 1),
              "rows": collect(recipe, work, pes)}
    atomic_write_text(work / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m asr_pe.bench.recipe_smoke", description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", required=True, choices=RECIPES)
    p.add_argument("--work", required=True, help="folder for the mirror, the recipe's work_dir and result.json")
    p.add_argument("--gpu", action="store_true", help="trainer=gpu (bf16-mixed), evaluation on cuda")
    p.add_argument("--dry", action="store_true", help="3 training steps of one PE")
    args = p.parse_args(argv)
    result = run_smoke(args.recipe, args.work, gpu=args.gpu, dry=args.dry)
    print(json.dumps(result, indent=1))
    return 0 if result["exit"] == 0 else 3  # run.sh failed: result.json and run.log say where


if __name__ == "__main__":
    sys.exit(main())
