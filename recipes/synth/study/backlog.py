"""Helpers of the ladder backlog lane (`backlog.sh`): input checks, the reproduction check of a
retrained run, the archive view of a run's ladder decodings, its dev-choice report, and the dev
choice among archived runs (stage 7's fine-tune settings).

    python recipes/synth/study/backlog.py check-inputs --ladder DIR --corpus DIR
    python recipes/synth/study/backlog.py reproduce RUN --study recipes/synth/study/seeds [--out FILE]
    python recipes/synth/study/backlog.py stage RUN OUT          # OUT/<run>/: what the archive keeps
    python recipes/synth/study/backlog.py reports RUN DEST       # DEST/<run>.md, DEST/<run>.choice.json
    python recipes/synth/study/backlog.py archived DEST RUN [--table-only] [--with-set SET]  # exit 0 when DEST holds RUN's archive
    python recipes/synth/study/backlog.py choose DEST CAND... --sets SET... --out FILE  # the dev choice among archived runs
    python recipes/synth/study/backlog.py same-source DEST SOURCE  # exit 0 when DEST's fine-tunes of SOURCE used its bytes
    python recipes/synth/study/backlog.py export-source RUN OUT  # OUT/: RUN's weights alone, a run folder to fine-tune from
    python recipes/synth/study/backlog.py summary DEST RUN       # one line: the choice and test CERs
    python recipes/synth/study/backlog.py attention-summary RUN  # one line: the local share per set

Every comparison is exact (bytes or parsed JSON); a difference is printed and exits 1.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LADDER_STUDY = REPO / "recipes" / "synth" / "study" / "ladder"
COMPOSITION = LADDER_STUDY / "ladder_composition.jsonl.xz"
PARTS = REPO / "recipes" / "synth" / "study" / "longform" / "parts.json"
LADDER_HASH = "3b1c23b1774d"     # ladder/README.md: the cache folder the study's ladder was built in
CORPUS_HASH = "21b0b5c080e1"     # the study corpus (7500 training utterances) the archived runs name


def check_inputs(ladder: Path, corpus: Path) -> int:
    """The built ladder and corpus are the ones the archive was made from: the folder hashes, the
    ladder's composition byte for byte, the 160 s long-form set's parts exactly."""
    from asr_pe.data.synth.ladder import write_composition
    bad = []
    if ladder.name != LADDER_HASH:
        bad.append(f"ladder folder {ladder.name} != {LADDER_HASH}")
    if corpus.name != CORPUS_HASH:
        bad.append(f"corpus folder {corpus.name} != {CORPUS_HASH}")
    with tempfile.TemporaryDirectory() as tmp:
        built = write_composition(ladder, Path(tmp) / "composition.jsonl.xz")
        a, b = lzma.decompress(built.read_bytes()), lzma.decompress(COMPOSITION.read_bytes())
        if a != b:
            bad.append(f"composition of {ladder} differs from {COMPOSITION}")
        else:
            print(f"ladder {ladder}: composition identical to {COMPOSITION.relative_to(REPO)} "
                  f"({len(a.splitlines())} rows)")
    manifests = sorted(corpus.glob("longform_*/longform.jsonl"))
    if not manifests:
        bad.append(f"{corpus}: no longform_*/longform.jsonl")
    else:
        rows = [json.loads(line) for m in manifests for line in m.read_text().splitlines() if line.strip()]
        built_parts = {r["id"]: r["parts"] for r in rows if "parts" in r}
        archived = json.loads(PARTS.read_text())
        if built_parts != archived:
            bad.append(f"long-form parts of {corpus} differ from {PARTS}")
        else:
            print(f"corpus {corpus}: long-form parts identical to {PARTS.relative_to(REPO)} "
                  f"({len(archived)} recordings)")
    for b in bad:
        print(f"MISMATCH: {b}", file=sys.stderr)
    return 1 if bad else 0


def _checkpoint_step(meta: dict) -> int | None:
    """The best checkpoint's global step a ``buckets.meta.json`` records; None where it records
    only the checkpoint's file name (archives written before checkpoint records)."""
    ckpt = meta.get("checkpoint")
    return ckpt.get("global_step") if isinstance(ckpt, dict) else None


def reproduce(run: Path, study: Path) -> dict:
    """Compare a retrained run's test and long-form decodings with the archived run of the same
    name in ``study``: per utterance hypothesis and errors, and the best checkpoint's step."""
    from asr_pe.results_table import read_table, render_run, table_of
    rows = read_table(table_of(study))
    if run.name not in rows:
        return {"run": run.name, "study": str(study), "reproduced": False, "why": "not in the archive"}
    rendered = render_run(rows[run.name])
    # named as in the repository (recipes/...), whichever checkout it was read from: stage 6 reads the
    # commit checkout's, which a lane's older worktree lacks
    parts = study.resolve().parts if study.is_absolute() else study.parts
    out: dict = {"run": run.name, "study": str(Path(*parts[parts.index("recipes"):])) if "recipes" in parts else str(study)}
    same = True
    for s in ("test", "longform"):
        rel = f"eval/{s}/per_utt.jsonl"
        if rel not in rendered or not (run / rel).is_file():
            out[s] = "missing"
            same = False
            continue
        old = [json.loads(x) for x in rendered[rel].splitlines() if x.strip()]
        new = [json.loads(x) for x in (run / rel).read_text().splitlines() if x.strip()]
        keys = ("id", "hyp", "char_errors", "errors")
        diff = sum(1 for a, b in zip(old, new) if any(a.get(k) != b.get(k) for k in keys)) + abs(len(old) - len(new))
        out[s] = {"utterances": len(new), "differing": diff,
                  "char_errors": [sum(r["char_errors"] for r in old), sum(r["char_errors"] for r in new)]}
        same &= diff == 0
        step_old = _checkpoint_step(json.loads(rendered[f"eval/{s}/buckets.meta.json"]))
        step_new = _checkpoint_step(json.loads((run / f"eval/{s}/buckets.meta.json").read_text()))
        out[f"{s}_best_step"] = [step_old, step_new]
        # the main study's archive predates checkpoint records ("checkpoint": "best.ckpt"): its
        # best step is unknown, and the per-utterance hypotheses alone decide
        same &= step_old is None or step_old == step_new
    out["reproduced"] = bool(same)
    out["machine"] = _machine()
    return out


def _machine() -> dict:
    """The machine the retrain ran on (reproduce runs right after it, on the same one): its CPU and
    the vector instructions torch dispatches to, on which "reproduced" depends (a retrain on an AVX2
    machine rounds otherwise than the AVX-512 one). Read here, not from run_info.json: the lanes'
    code (9c9013f) does not record machines."""
    import platform

    import torch
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}


def stage(run: Path, out: Path) -> Path:
    """``out/<run>/``: run_info.json, config.yaml, the ladder sets' results (eval/ladder_*; the dev
    pool's sets without their per-utterance scores, as ladder/README.md archives them) and every
    decoding of the model's own test and long-form sets (eval/test*, eval/longform*: a retrain that
    does not reproduce the archived run is another model, whose results must be on record too; the
    rate ladders of test, eval/test_hop* and eval/test_tempo*, of stage 6; the windowed decodings,
    eval/test_window5 and eval/longform_window5, of stage 7); the report (eval/ladder/) is
    archived by `reports`."""
    dest = out / run.name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in ("run_info.json", "config.yaml"):
        shutil.copy2(run / name, dest / name)
    for d in sorted([*(run / "eval").glob("ladder_*"), *(run / "eval").glob("test*"), *(run / "eval").glob("longform*")]):
        if not d.is_dir():
            continue
        (dest / "eval" / d.name).mkdir(parents=True)
        for f in ("buckets.csv", "buckets.meta.json", "per_utt.jsonl"):
            if not (d / f).is_file():
                continue
            if f == "per_utt.jsonl" and d.name.startswith("ladder_dev_"):
                continue
            shutil.copy2(d / f, dest / "eval" / d.name / f)
    if (run / "attention_stats" / "attention_stats.csv").is_file():  # backlog.sh stage 5 measured it
        shutil.copytree(run / "attention_stats", dest / "attention_stats")
    return dest


def reports(run: Path, dest: Path) -> None:
    """The run's ladder report and choice as ``dest/<run>.md`` / ``.choice.json``, the paths in the
    choice written as the study's (runs/synth_study/<run>, ~/.cache/...), not this machine's."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(run / "eval" / "ladder" / "report.md", dest / f"{run.name}.md")
    choice = json.loads((run / "eval" / "ladder" / "choice.json").read_text())
    choice["run"] = f"runs/synth_study/{run.name}"
    choice["ladder"] = f"~/.cache/asr_pe/synth_ladder/{Path(choice['ladder']).name}"
    (dest / f"{run.name}.choice.json").write_text(json.dumps(choice, indent=1) + "\n")


def archived(dest: Path, run: str, table_only: bool = False, with_set: str | None = None) -> bool:
    """Whether ``dest``'s table holds ``run`` and, unless ``table_only`` (a run with no ladder
    choice: stages 5 and 7), its ladder report and choice; with ``with_set``, also its results of
    that set (``eval/<with_set>/buckets.csv``: stage 7's runs are archived with their dev sets
    first, with their test sets once chosen)."""
    from asr_pe.results_table import read_table, runs_in, table_of
    table = dest / "results.jsonl.xz"
    if not (table.is_file() and run in runs_in(dest)):
        return False
    if with_set is not None and f"eval/{with_set}/buckets.csv" not in {r["path"] for r in read_table(table_of(dest))[run]}:
        return False
    return table_only or ((dest / "reports" / f"{run}.choice.json").is_file() and (dest / "reports" / f"{run}.md").is_file())


def choose(dest: Path, candidates: list[str], sets: list[str]) -> dict:
    """The dev choice among archived runs of ``dest``: each candidate ``<run>`` or ``<run>@<remedy>``
    (its results ``eval/<set><the remedy's suffix>/``) scored by its CER pooled over ``sets`` (Σ char
    errors / Σ reference chars of each set's ``all`` row), the lowest chosen (the first of equals, in
    the order given). A candidate without a result of every set is an error, not a skip: a choice
    among fewer candidates than offered would be quietly another choice."""
    import csv
    import io

    from asr_pe.inference.remedy_specs import parse_remedies, remedy_suffix
    from asr_pe.results_table import read_table, render_run, table_of

    runs = read_table(table_of(dest))
    cers = {}
    for cand in candidates:
        run, _, remedy = cand.partition("@")
        if run not in runs:
            raise SystemExit(f"error: choose: {dest} holds no run {run!r}")
        files = render_run(runs[run])
        errors = chars = 0
        for s in sets:
            path = f"eval/{s}{remedy_suffix(parse_remedies(remedy)) if remedy else ''}/buckets.csv"
            if path not in files:
                raise SystemExit(f"error: choose: {dest}'s run {run} has no {path}")
            row = next(r for r in csv.DictReader(io.StringIO(files[path])) if r["bucket"] == "all")
            errors, chars = errors + int(row["char_errors"]), chars + int(row["ref_chars"])
        cers[cand] = round(100 * errors / chars, 3)
    return {"sets": sets, "dev_cer": cers, "chosen": min(cers, key=cers.get)}


def same_source(dest: Path, source: Path) -> list[str]:
    """Where the archived fine-tunes in ``dest`` of a source run named like ``source`` (run_info's
    ``init_from.run``) started from other weights than ``source``'s checkpoint now: their
    ``init_from.sha256`` against the digest of the same checkpoint file. A source trained again in a
    later session must be the same bytes, or that seed's grid would compare fine-tunes of two models
    (stage 7 trains a source again where no checkpoint outlived a session).

    A record with ``weights_sha256`` is compared by the weights alone. An older record has only the
    file's digest, and the file names its run folder by absolute path: the same weights trained in
    another folder differ there, so the message says which folder to train the source in. Either digest
    differs for a source trained on another CPU vendor (seed 3's, 2026-12-04: Xeon, then EPYC).
    Where ``dest`` archives the source's weights (``sources/<source>/``, `export_source`), those are
    compared too, so a source trained again before any fine-tune of it is archived is checked as well."""
    from asr_pe.evaluation.provenance import file_sha256, weights_sha256
    from asr_pe.results_table import read_table, table_of

    digests: dict[tuple[str, str], str] = {}
    bad = []
    exported = dest / "sources" / source.name / SOURCE_RECORD
    if exported.is_file():   # the archived weights themselves (`export_source`), fine-tuned or not yet
        want = json.loads(exported.read_text())["weights_sha256"]
        ckpt = source / "checkpoints" / "best.ckpt"
        now = digests["best.ckpt", "weights_sha256"] = weights_sha256(ckpt) if ckpt.is_file() else "missing"
        if now != want:
            bad.append(f"{exported.parent.relative_to(dest)} archives weights_sha256 {want[:12]}, {ckpt} is {now[:12]}"
                       + (" (training is deterministic on one machine type, not across CPU vendors)" if now != "missing" else ""))
    if not (dest / "results.jsonl.xz").is_file():
        return bad
    for run, rows in sorted(read_table(table_of(dest)).items()):
        info = next((r["data"] for r in rows if r["path"] == "run_info.json"), {})
        init = info.get("init_from") or {}
        if Path(str(init.get("run", ""))).name != source.name:
            continue
        ckpt = source / "checkpoints" / init["name"]
        key = "weights_sha256" if init.get("weights_sha256") else "sha256"
        if (init["name"], key) not in digests:
            digest = weights_sha256 if key == "weights_sha256" else file_sha256
            digests[init["name"], key] = digest(ckpt) if ckpt.is_file() else "missing"
        now = digests[init["name"], key]
        if now != init[key]:
            where = (f" (this record has the file's digest only, and the file names its run folder: train the "
                     f"source in {init['run']})" if key == "sha256" and now != "missing"
                     and Path(init["run"]) != source else "")
            where += " (training is deterministic on one machine type, not across CPU vendors)" if now != "missing" else ""
            bad.append(f"{run} started from {source.name}/checkpoints/{init['name']} {key} {init[key][:12]}, "
                       f"{ckpt} is {now[:12]}{where}")
    return bad


def _source_files() -> tuple[str, ...]:
    """What a fine-tune (``init_from``) and an evaluation read beside the weights: the run folder's names."""
    from asr_pe.run_folder import CONFIG, PREPARED_FILES, RUN_INFO
    return (CONFIG, *PREPARED_FILES, RUN_INFO)


SOURCE_RECORD = "source.json"


def export_source(run: Path, out: Path) -> dict:
    """``out``: a run folder holding ``run``'s weights alone, for fine-tunes in later sessions.

    ``checkpoints/best.ckpt`` keeps the checkpoint's ``state_dict`` (every entry, so `weights_sha256`
    is the original's), ``global_step`` and ``epoch``, without the optimiser and callback state (7 MB
    of 22); beside it the files a fine-tune (``init_from``) and an evaluation read (`_source_files`), and
    `SOURCE_RECORD`: the checkpoint it came from (run, name, step, file digest), the weights' digest and
    the machine. A source trained again gives the same weights only on the machine type it was first
    trained on (seed 3, 2026-12-04: Xeon, then EPYC), so stage 7 archives each source so and a later
    session fine-tunes from these weights. Written beside ``out`` and renamed into place; an ``out``
    that exists is an error."""
    import torch

    from asr_pe.evaluation.provenance import checkpoint_record, weights_sha256

    ckpt = run / "checkpoints" / "best.ckpt"
    if out.exists():
        raise SystemExit(f"error: export-source: {out} exists; it holds an exported source already")
    missing = [name for name in _source_files() if not (run / name).is_file()] + ([] if ckpt.is_file() else ["checkpoints/best.ckpt"])
    if missing:
        raise SystemExit(f"error: export-source: {run} lacks {', '.join(missing)}")
    full = torch.load(ckpt, map_location="cpu", weights_only=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "checkpoints").mkdir()
        torch.save({k: full[k] for k in ("state_dict", "global_step", "epoch", "pytorch-lightning_version") if k in full},
                   tmp / "checkpoints" / "best.ckpt")
        for name in _source_files():
            shutil.copyfile(run / name, tmp / name)
        record = {"from": {"run": str(run), **checkpoint_record(ckpt)}, "weights_sha256": weights_sha256(ckpt),
                  "machine": _machine()}
        kept = weights_sha256(tmp / "checkpoints" / "best.ckpt")
        assert kept == record["weights_sha256"], f"export-source: the exported weights of {ckpt} differ ({kept[:12]})"
        (tmp / SOURCE_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        tmp.chmod(0o755)   # mkdtemp made it private
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def attention_summary(run: Path) -> str:
    """One line for the commit message: the run's mean share of attention within its local span, per
    set of ``attention_stats/attention_stats.csv`` (every recording has one row per layer and head)."""
    import csv
    shares: dict[str, list[float]] = {}
    with open(run / "attention_stats" / "attention_stats.csv", newline="") as f:
        for row in csv.DictReader(f):
            shares.setdefault(row["test_set"], []).append(float(row["local_mass"]))
    return f"{run.name}: local share " + ", ".join(
        f"{name.removeprefix('ladder_test_')} {100 * sum(v) / len(v):.1f} %" for name, v in shares.items())


def summary(dest: Path, run: str) -> str:
    """One line for the log and the commit message: the dev rates, the choice and its test rate (when
    dev keeps the plain decoding, ``test_rate_chosen`` is null: test is decoded plainly only)."""
    c = json.loads((dest / "reports" / f"{run}.choice.json").read_text())
    dev = ", ".join(f"{k} {v:.2f}" for k, v in c["dev_rates"].items())
    test = (f"test {c['test_rate_plain']:.2f} %" if c["test_rate_chosen"] is None
            else f"test {c['test_rate_chosen']:.2f} % against plain {c['test_rate_plain']:.2f} %")
    return f"{run}: dev (no-gap, every rung) {dev}; chosen {c['chosen']}; {test}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python recipes/synth/study/backlog.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("check-inputs")
    a.add_argument("--ladder", type=Path, required=True)
    a.add_argument("--corpus", type=Path, required=True)
    a = sub.add_parser("reproduce")
    a.add_argument("run", type=Path)
    a.add_argument("--study", type=Path, required=True)
    a.add_argument("--out", type=Path, default=None, help="append the result as a JSON line")
    a = sub.add_parser("stage")
    a.add_argument("run", type=Path)
    a.add_argument("out", type=Path)
    a = sub.add_parser("reports")
    a.add_argument("run", type=Path)
    a.add_argument("dest", type=Path)
    a = sub.add_parser("archived")
    a.add_argument("dest", type=Path)
    a.add_argument("run")
    a.add_argument("--table-only", action="store_true", help="the table alone (a run with no ladder choice)")
    a.add_argument("--with-set", default=None, help="and the run's results of this set (eval/<set>/)")
    a = sub.add_parser("choose")
    a.add_argument("dest", type=Path)
    a.add_argument("candidates", nargs="+", help="<run> or <run>@<remedy>, e.g. source_rope_ctc_s2@window:5")
    a.add_argument("--sets", nargs="+", required=True)
    a.add_argument("--out", type=Path, required=True, help="the choice as JSON; the chosen candidate is printed")
    a = sub.add_parser("same-source")
    a.add_argument("dest", type=Path)
    a.add_argument("source", type=Path, help="the source run folder (e.g. <work>/runs/finetune160/source_rope_ctc_s2)")
    a = sub.add_parser("export-source")
    a.add_argument("run", type=Path, help="the trained source run folder")
    a.add_argument("out", type=Path, help="the folder to write (<dest>/sources/<run>)")
    a = sub.add_parser("attention-summary")
    a.add_argument("run", type=Path)
    a = sub.add_parser("summary")
    a.add_argument("dest", type=Path)
    a.add_argument("run")
    args = p.parse_args(argv)
    if args.cmd == "check-inputs":
        return check_inputs(args.ladder, args.corpus)
    if args.cmd == "reproduce":
        r = reproduce(args.run, args.study)
        line = json.dumps(r)
        print(line)
        if args.out:
            kept = [x for x in (args.out.read_text().splitlines() if args.out.is_file() else [])
                    if x.strip() and json.loads(x).get("run") != r["run"]]
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text("".join(x + "\n" for x in sorted(kept + [line])))
        return 0
    if args.cmd == "stage":
        print(stage(args.run, args.out))
        return 0
    if args.cmd == "reports":
        reports(args.run, args.dest)
        return 0
    if args.cmd == "archived":
        return 0 if archived(args.dest, args.run, args.table_only, args.with_set) else 1
    if args.cmd == "choose":
        c = choose(args.dest, args.candidates, args.sets)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(c, indent=1) + "\n")
        print(c["chosen"])
        return 0
    if args.cmd == "same-source":
        bad = same_source(args.dest, args.source)
        for line in bad:
            print(f"error: {line}", file=sys.stderr)
        return 1 if bad else 0
    if args.cmd == "export-source":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        r = export_source(args.run, args.out)
        print(f"{args.out}: weights_sha256 {r['weights_sha256'][:12]} of {r['from']['run']}/checkpoints/{r['from']['name']} "
              f"(step {r['from']['global_step']})")
        return 0
    if args.cmd == "attention-summary":
        print(attention_summary(args.run))
        return 0
    if args.cmd == "summary":
        print(summary(args.dest, args.run))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
