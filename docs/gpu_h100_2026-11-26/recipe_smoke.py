"""The LibriSpeech recipe's smoke run (stages 0-6) on official-layout fixture archives, on a GPU.

Usage: python .gpu/recipe_smoke.py WORK TRAINER DEVICE  (e.g. gpu cuda)
The archives come from tests/recipes/fixtures.py (audio that spells its transcript), served by a
file:// mirror with its md5sum.txt, exactly as the slow recipe test serves them over HTTP."""
import hashlib, importlib.util, json, subprocess, sys, tarfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("fx", REPO / "tests/recipes/fixtures.py")
fx = importlib.util.module_from_spec(spec); sys.modules["fx"] = fx; spec.loader.exec_module(fx)
work, trainer, device = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
src, mirror = work / "src", work / "mirror"
mirror.mkdir(parents=True, exist_ok=True)
fx.make_librispeech_tree(src, fx.SMOKE_LIBRISPEECH_LAYOUT, seconds_per_char=0.07, spelled=True)
top = {"SPEAKERS.TXT": ";ID |SEX| SUBSET |MINUTES| NAME\n", "CHAPTERS.TXT": ";ID |READER\n",
       "BOOKS.TXT": ";ID |BOOK TITLE\n", "LICENSE.TXT": "CC BY 4.0\n", "README.TXT": "LibriSpeech ASR corpus\n"}
sums = []
for part in ("dev-clean", "test-clean"):
    for name, text in top.items():
        (src / "LibriSpeech" / name).write_text(text)
    out = mirror / f"{part}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for name in top:
            tar.add(src / "LibriSpeech" / name, arcname=f"LibriSpeech/{name}")
        tar.add(src / "LibriSpeech" / part, arcname=f"LibriSpeech/{part}")
    sums.append(f"{hashlib.md5(out.read_bytes()).hexdigest()}  {part}.tar.gz\n")
(mirror / "md5sum.txt").write_text("".join(sums))
pes = "none rope relative cape"
args = ["bash", str(REPO / "recipes/librispeech/run.sh"), "--work_dir", str(work / "work"),
        "--mirror", f"file://{mirror}", "--checksums", str(mirror / "md5sum.txt"),
        "--train_parts", "dev-clean", "--dev_parts", "dev-clean", "--test_parts", "test-clean",
        "--longform_durations", "[8]", "--pes", pes, "--smoke",
        "--extra", f"trainer={trainer} trainer.max_steps=150 trainer.enable_progress_bar=false",
        "--eval_extra", f"device={device}"]
t0 = time.time()
proc = subprocess.run(args, text=True, capture_output=True)
print(proc.stdout[-6000:]); print(proc.stderr[-6000:], file=sys.stderr)
print(f"run.sh exit {proc.returncode} in {time.time() - t0:.0f} s")
import csv
for pe in pes.split():
    run = work / "work" / "runs" / pe
    cfg = (run / "config.yaml").read_text() if (run / "config.yaml").exists() else ""
    prec = [l.strip() for l in cfg.splitlines() if "precision:" in l or "accelerator:" in l]
    rows = {}
    for s in ("test-clean", "test-clean_long"):
        f = run / "eval" / s / "buckets.csv"
        if f.exists():
            r = [x for x in csv.DictReader(f.open()) if x["bucket"] == "all"]
            rows[s] = (r[0]["cer"], r[0].get("wer"), r[0].get("n_utts") or r[0].get("utterances"))
    metrics = list(run.glob("logs/**/metrics.csv"))
    losses = [float(r["train/loss"]) for r in csv.DictReader(metrics[0].open()) if r.get("train/loss")] if metrics else []
    info = run / "run_info.json"
    print(pe, prec, rows, "loss first/last", losses[:2], losses[-2:],
          json.loads(info.read_text()).get("device", "") if info.exists() else "")
