"""A study's archived runs in one results.jsonl.xz: nothing lost against the run folders it
replaced, adding runs is idempotent, the readers take the same run paths as before, and a table
written as gzip before xz is still read and converts to xz without a byte changing."""

import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from asr_pe.evaluation.buckets import write_bucket_files
from asr_pe.evaluation.length_ratio import read_errors
from asr_pe.plots.wer_vs_length import find_run_dirs, load_runs, read_run_info
from asr_pe.results_table import (GZIP_TABLE_NAME, TABLE_NAME, add_runs, is_remedy_result, locate, logical_path,
                                  main, read_table, render_run, run_identity, runs_in, table_of, table_rows)

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "recipes" / "synth" / "study"
TABLES = sorted(STUDY.rglob(TABLE_NAME))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    # the tables of these tests are written out below the test's folder, not the user's cache
    monkeypatch.setenv("ASR_PE_CACHE", str(tmp_path / "cache"))


def _git(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, check=True, **kw)


def _folders_before_the_table(study: Path) -> tuple[str, dict[str, bytes]]:
    """(commit, path inside the study -> bytes) of the run folders the commit that removed them
    held: the parent of the last commit that deleted a ``<study>/*/run_info.json`` (run folders
    folded in later are checked against the commit before their own removal)."""
    rel = study.relative_to(REPO).as_posix()
    # -m: a merge that folded a branch's run folders into the table removed them against its
    # second parent; the parent that holds them is the one read
    removed = _git("log", "-1", "-m", "--format=%H", "--diff-filter=D", "--", f"{rel}/*/run_info.json",
                   text=True).stdout.strip()
    if not removed:                     # a table written from live runs, never committed as folders
        return None, {}
    names, before = [], None
    for parent in _git("rev-list", "--parents", "-n1", removed, text=True).stdout.split()[1:]:
        try:
            names = _git("ls-tree", "-r", "--name-only", parent, "--", f"{rel}/", text=True).stdout.split()
        except subprocess.CalledProcessError:
            continue
        if any(n.endswith("/run_info.json") for n in names):
            before = parent
            break
    if before is None:
        pytest.skip(f"the parents of {removed} are not in this clone (shallow?)")
    runs = {n.split("/")[-2] for n in names if n.endswith("/run_info.json") and n.count("/") == rel.count("/") + 2}
    paths = [n for n in names if n[len(rel) + 1:].split("/")[0] in runs]
    batch = _git("cat-file", "--batch", input="".join(f"{before}:{p}\n" for p in paths).encode()).stdout
    out, pos = {}, 0
    for p in paths:                     # "<sha> blob <size>\n<content>\n" per path
        header_end = batch.index(b"\n", pos)
        size = int(batch[pos:header_end].split()[2])
        out[p[len(rel) + 1:]] = batch[header_end + 1: header_end + 1 + size]
        pos = header_end + 2 + size
    return before, out


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="not a git work tree")
@pytest.mark.parametrize("table", TABLES, ids=[str(t.parent.relative_to(STUDY)) for t in TABLES])
def test_the_table_holds_every_file_of_the_run_folders_it_replaced(table):
    commit, files = _folders_before_the_table(table.parent)
    runs = read_table(table)
    if commit is None:
        # nothing in git to compare with (archived from live run folders, e.g. the length ladder):
        # the table is its own record, so each run's files render back to the same rows
        for run, rows in runs.items():
            assert table_rows(run, render_run(rows)) == rows, run
        kinds = {row["kind"] for rows in runs.values() for row in rows}
        assert {"bucket", "json"} <= kinds
        # per-utterance rows come with any set but the dev ladder's (which stage() archives without
        # them: a study whose runs are only decoded on the dev pool so far, finetune160, has none)
        if any(not p.split("/")[1].startswith("ladder_dev_") for rows in runs.values()
               for p in render_run(rows) if p.startswith("eval/")):
            assert "utt" in kinds
        return
    rendered = {f"{run}/{rel}": text.encode("utf-8") for run, rows in runs.items()
                for rel, text in render_run(rows).items()}
    assert files, f"no run files at {commit}"
    # eval/<long set>/in_context.json is derived (per_utt.jsonl and the parts give it again) and
    # is not archived; the fine-tune control's folders held it before they were folded in
    files = {p: b for p, b in files.items() if not p.endswith("/in_context.json")}
    missing = sorted(set(files) - set(rendered))
    assert not missing, f"{len(missing)} file(s) of {commit} not in {table}: {missing[:3]}"
    differing = [p for p in files if rendered[p] != files[p]]
    assert not differing, f"{len(differing)} file(s) differ from {commit}: {differing[:3]}"
    # and the table is data, not text blobs: per-utterance and bucket rows as columns
    kinds = {row["kind"] for rows in runs.values() for row in rows}
    assert {"utt", "bucket", "json"} <= kinds


def _run(root: Path, name: str, cer: float, *, remedy: bool = False) -> Path:
    run = root / name
    row = {"bucket": "0-2", "lo": 0.0, "hi": 2.0, "utterances": 2, "mean_duration": 1.5, "ref_words": 20,
           "errors": 5, "sub": 5, "del": 0, "ins": 0, "wer": 25.0, "wer_ci_low": float("nan"),
           "wer_ci_high": 30.0, "ref_chars": 100, "char_errors": int(cer), "cer": cer,
           "cer_ci_low": cer - 1, "cer_ci_high": cer + 1}
    for folder, meta in [("test", {"test_set": "test", "decode": {"method": "greedy"}})] + (
            [("test_window", {"test_set": "test", "remedy": "window"})] if remedy else []):
        write_bucket_files([row], run / "eval" / folder, meta=meta)
        (run / "eval" / folder / "per_utt.jsonl").write_text(
            "".join(json.dumps({"id": f"u{i}", "duration": 1.0 + i / 3, "ref": "a b", "hyp": "a c",
                                "errors": i, "ref_words": 2, "char_errors": i, "ref_chars": 3}) + "\n"
                    for i in range(2)))
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (run / "config.yaml").write_text("pe: rope\nseed: 0\n")
    (run / "run_info.json").write_text(json.dumps({"pe": name.split("_")[0], "loss": "ctc", "seed": 0,
                                                   "label": f"{name.split('_')[0]}/ctc"}, indent=2))
    return run


def test_adding_runs_keeps_the_archive_files_and_is_idempotent(tmp_path):
    live = tmp_path / "live"
    a, b = _run(live, "rope_ctc_s0", 7.0, remedy=True), _run(live, "none_ctc_s0", 12.0)
    table = tmp_path / "study" / TABLE_NAME
    add_runs(table, [a])
    first = table.read_bytes()
    add_runs(table, [a])
    assert table.read_bytes() == first                      # the same run again: the same bytes
    add_runs(table, [b])
    assert runs_in(table.parent) == ["none_ctc_s0", "rope_ctc_s0"]
    rope = render_run(read_table(table)["rope_ctc_s0"])
    # no checkpoints, and the remedy folder keeps its bucket tables without per-utterance scores
    assert sorted(rope) == ["config.yaml", "eval/test/buckets.csv", "eval/test/buckets.meta.json",
                            "eval/test/per_utt.jsonl", "eval/test_window/buckets.csv",
                            "eval/test_window/buckets.meta.json", "run_info.json"]
    assert all(rope[rel] == (a / rel).read_text() for rel in rope)
    utt = [r for r in read_table(table)["rope_ctc_s0"] if r["kind"] == "utt"]
    assert [(r["set"], r["suffix"], r["id"], r["errors"]) for r in utt] == [("test", "", "u0", 0), ("test", "", "u1", 1)]
    buckets = [r for r in read_table(table)["rope_ctc_s0"] if r["kind"] == "bucket"]
    assert {r["suffix"] for r in buckets} == {"", "_window"} and buckets[0]["cer"] == 7.0
    # a run evaluated again replaces its rows
    (a / "eval" / "test" / "per_utt.jsonl").write_text('{"id": "u9", "duration": 2.5}\n')
    add_runs(table, [a])
    assert render_run(read_table(table)["rope_ctc_s0"])["eval/test/per_utt.jsonl"] == '{"id": "u9", "duration": 2.5}\n'
    # readable with plain lzma + json (what pandas.read_json(..., lines=True) reads, and xzcat)
    with lzma.open(table, "rt") as f:
        assert {json.loads(line)["run"] for line in f} == {"none_ctc_s0", "rope_ctc_s0"}


def test_a_study_that_reports_a_remedy_s_in_context_ratio_keeps_its_per_utterance_scores(tmp_path):
    """--remedy-utts: the window folder's per_utt.jsonl is archived too, and renders back."""
    a = _run(tmp_path / "live", "rope_ctc_s0", 7.0, remedy=True)
    table = tmp_path / "study" / TABLE_NAME
    add_runs(table, [a], remedy_utts=True)
    rope = render_run(read_table(table)["rope_ctc_s0"])
    assert "eval/test_window/per_utt.jsonl" in rope
    assert rope["eval/test_window/per_utt.jsonl"] == (a / "eval" / "test_window" / "per_utt.jsonl").read_text()
    utt = [r for r in read_table(table)["rope_ctc_s0"] if r["kind"] == "utt"]
    assert sorted({r["suffix"] for r in utt}) == ["", "_window"] and len(utt) == 4


def test_numbers_are_stored_as_numbers_and_a_file_that_would_not_round_trip_as_text():
    files = {"eval/test/buckets.csv": "bucket,lo,cer\n0-2,0,1.50\nall,0,nan\n",   # "%.2f" column, "nan" cell
             "attention_stats/attention_stats.csv": "a,b\r\n1,2\r\n",          # not the writer's line ends
             "eval/test/per_utt.jsonl": '{"id":"u0"}\n',                         # not json.dumps' spacing
             "run_info.json": '{"b": 1, "a": 2}'}                                 # unsorted, no newline
    rows = table_rows("r", files)
    by_path = {}
    for r in rows:
        by_path.setdefault(r["path"], []).append(r)
    assert [r["kind"] for r in by_path["eval/test/buckets.csv"]] == ["csv_header", "bucket", "bucket"]
    assert [(r["lo"], r["cer"]) for r in by_path["eval/test/buckets.csv"][1:]] == [(0, 1.5), (0, "nan")]
    assert [r["kind"] for p, rs in by_path.items() if p != "eval/test/buckets.csv" for r in rs] == ["text"] * 3
    assert render_run(rows) == files


def test_readers_take_the_run_paths_of_archived_runs(tmp_path, monkeypatch):
    live = tmp_path / "live"
    runs = [_run(live, "rope_ctc_s0", 7.0), _run(live, "rope_ctc_s1", 5.0), _run(live, "none_ctc_s0", 12.0)]
    study = tmp_path / "study"
    add_runs(study / TABLE_NAME, runs[:2])
    fresh = _run(study, "zzz_ctc_s0", 9.0)                      # a fresh run folder beside the table
    monkeypatch.chdir(tmp_path)
    # a run path, a pattern (an unmatched shell glob), the table itself, a folder searched below
    by_path = find_run_dirs(["study/rope_ctc_s1"])
    assert [logical_path(p) for p in by_path] == [study.resolve() / "rope_ctc_s1"]
    assert read_run_info(Path("study/rope_ctc_s1"))["pe"] == "rope"
    assert [p.name for p in find_run_dirs(["study/rope_ctc_s*"])] == ["rope_ctc_s0", "rope_ctc_s1"]
    assert [p.name for p in find_run_dirs([f"study/{TABLE_NAME}"])] == ["rope_ctc_s0", "rope_ctc_s1"]
    assert [p.name for p in find_run_dirs(["study"])] == ["rope_ctc_s0", "rope_ctc_s1", "zzz_ctc_s0"]
    assert find_run_dirs([fresh]) == [fresh.resolve()]          # read in place, as before
    loaded, _ = load_runs(["study/rope_ctc_s*"], "test")
    assert [r.rows[0]["cer"] for r in loaded] == [7.0, 5.0]
    # a path inside an archived run, for the readers that take a set folder
    ids, errors, _ = read_errors("study/rope_ctc_s0/eval/test")
    assert ids == ["u0", "u1"] and list(errors) == [0.0, 1.0]
    assert read_errors(live / "rope_ctc_s0" / "eval" / "test")[0] == ids
    assert locate("study/nope_ctc_s0/eval") == Path("study/nope_ctc_s0/eval")   # not archived: unchanged
    with pytest.raises(FileNotFoundError, match="study/nope"):
        find_run_dirs(["study/nope_ctc_s0"])


def test_the_command_line_adds_lists_and_refuses_what_is_no_run(tmp_path):
    a = _run(tmp_path / "archive_folders", "rope_ctc_s0", 7.0)
    (a / "checkpoints" / "last.ckpt").unlink()
    (a / "checkpoints").rmdir()
    (a / "eval" / "test" / "buckets.md").unlink()          # an archive folder: the archived files only
    study = tmp_path / "archive_folders"
    cli = [sys.executable, "-m", "asr_pe.results_table"]
    env_kw = dict(cwd=REPO, capture_output=True, text=True)
    bad = subprocess.run([*cli, "add", str(study), str(tmp_path / "nope")], **env_kw)
    assert bad.returncode == 2 and bad.stderr.startswith("error: not run folders") and "Traceback" not in bad.stderr
    assert not (study / TABLE_NAME).exists()
    ok = subprocess.run([*cli, "add", str(study), "--remove"], **env_kw)     # every run folder in it
    assert ok.returncode == 0, ok.stderr
    assert not a.exists() and [p.name for p in study.iterdir()] == [TABLE_NAME]
    listed = subprocess.run([*cli, "list", str(study)], **env_kw).stdout.split()
    assert listed == [str(study / "rope_ctc_s0")]
    # a run archived later as a folder beside the table (a background job's seeds) is folded in
    c = _run(study, "rope_ctc_s2", 6.0)
    shutil.rmtree(c / "checkpoints")
    (c / "eval" / "test" / "buckets.md").unlink()
    folded = subprocess.run([*cli, "add", str(study), "--remove"], **env_kw)
    assert folded.returncode == 0, folded.stderr
    assert runs_in(study) == ["rope_ctc_s0", "rope_ctc_s2"] and not c.exists()
    # a folder with files the archive does not keep is not removed (it would lose them)
    b = _run(tmp_path / "live", "none_ctc_s0", 12.0)
    kept = subprocess.run([*cli, "add", str(study), str(b), "--remove"], **env_kw)
    assert kept.returncode == 2 and "checkpoints/last.ckpt" in kept.stderr and b.exists()


def test_a_table_is_written_out_once_per_version(tmp_path):
    live = tmp_path / "live"
    study = tmp_path / "study"
    add_runs(study / TABLE_NAME, [_run(live, "rope_ctc_s0", 7.0)])
    first = locate(study / "rope_ctc_s0")
    assert first != study / "rope_ctc_s0" and logical_path(first) == (study / "rope_ctc_s0").resolve()
    entries = sorted(p.name for p in (tmp_path / "cache" / "results").iterdir())
    # another process finds the same folder written; a changed table replaces it
    again = subprocess.run([sys.executable, "-c", "import sys; from asr_pe.results_table import locate; "
                            f"print(locate(sys.argv[1]))", str(study / "rope_ctc_s0")],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    assert again == str(first)
    add_runs(study / TABLE_NAME, [_run(live, "none_ctc_s0", 12.0)])
    assert runs_in(study) == ["none_ctc_s0", "rope_ctc_s0"]
    now = sorted(p.name for p in (tmp_path / "cache" / "results").iterdir())
    assert len(now) == 1 and now != entries


def test_a_study_inside_another_keeps_its_runs_written_out_in_either_order(tmp_path):
    """``ladder/`` and ``ladder/more_pes/`` both hold a table. Writing out the outer one once
    deleted the inner one's runs (its entry held a folder at the outer study's path), so a
    reader that had located an inner run found no files: CI's first make test on a fresh cache,
    two workers reading the two studies at once."""
    live = tmp_path / "live"
    outer, inner = tmp_path / "ladder", tmp_path / "ladder" / "more_pes"
    add_runs(outer / TABLE_NAME, [_run(live, "rope_ctc_s0", 7.0)])
    add_runs(inner / TABLE_NAME, [_run(live, "shaw_ctc_s0", 9.0)])
    for first, second in [(inner, outer), (outer, inner)]:
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        for study in (first, second):
            for name in runs_in(study):
                assert (locate(study / name) / "eval" / "test" / "per_utt.jsonl").is_file(), (study, name)
        for study in (first, second):          # both still there, whichever came first
            for name in runs_in(study):
                per_utt = locate(study / name) / "eval" / "test" / "per_utt.jsonl"
                assert len(per_utt.read_text().splitlines()) == 2, per_utt
    # a new version of the inner table replaces the inner entry only
    add_runs(inner / TABLE_NAME, [_run(live, "alibi_ctc_s0", 8.0)])
    assert runs_in(inner) == ["alibi_ctc_s0", "shaw_ctc_s0"] and runs_in(outer) == ["rope_ctc_s0"]
    assert (locate(outer / "rope_ctc_s0") / "run_info.json").is_file()
    assert len(list((tmp_path / "cache" / "results").iterdir())) == 2


_READER = """
import sys, time
from pathlib import Path
from asr_pe.results_table import locate, runs_in
study, mine, theirs = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
wait_first = sys.argv[4] == "second"
def wait(flag):
    for _ in range(600):
        if flag.exists():
            return
        time.sleep(0.05)
    sys.exit("timed out waiting for " + str(flag))
if wait_first:
    wait(theirs)
folders = [locate(study / name) for name in runs_in(study)]     # written out here
mine.write_text("")
wait(theirs)
for folder in folders:                                           # read after the other process wrote out its table
    print(folder.name, len((folder / "eval" / "test" / "per_utt.jsonl").read_text().splitlines()))
"""


def test_two_processes_writing_out_a_study_and_one_inside_it_at_once_both_read_their_runs(tmp_path):
    """One process writes out ``ladder/more_pes/``'s table, then another ``ladder/``'s, each with
    its own fresh in-process memo and one shared cache (CI's two test workers); the first then
    reads its runs' files. Before entries named their study the second deleted them (exit 1)."""
    live = tmp_path / "live"
    outer, inner = tmp_path / "ladder", tmp_path / "ladder" / "more_pes"
    add_runs(outer / TABLE_NAME, [_run(live, "rope_ctc_s0", 7.0)])
    add_runs(inner / TABLE_NAME, [_run(live, "shaw_ctc_s0", 9.0), _run(live, "t5_ctc_s0", 8.0)])
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    env = {**os.environ, "ASR_PE_CACHE": str(tmp_path / "cache")}
    a, b = tmp_path / "inner.done", tmp_path / "outer.done"
    procs = [subprocess.Popen([sys.executable, "-c", _READER, str(study), str(mine), str(theirs), order], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for study, mine, theirs, order in ((inner, a, b, "first"), (outer, b, a, "second"))]
    out = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-500:] for o in out]
    assert out[0][0].split() == ["shaw_ctc_s0", "2", "t5_ctc_s0", "2"] and out[1][0].split() == ["rope_ctc_s0", "2"]


def _gzip_table(study: Path, runs: list[Path]) -> bytes:
    """A study table as the project wrote it before xz: ``results.jsonl.gz``, gzip -9, no mtime;
    returns its JSON lines."""
    rows = [row for d in sorted(runs, key=lambda d: d.name)
            for row in table_rows(d.name, {rel: (d / rel).read_text() for rel in ("run_info.json", "config.yaml",
                                                                                  "eval/test/per_utt.jsonl")})]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    study.mkdir(parents=True, exist_ok=True)
    (study / GZIP_TABLE_NAME).write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    return text


def test_a_gzip_table_is_read_and_converted_to_xz_byte_for_byte(tmp_path):
    live = tmp_path / "live"
    runs = [_run(live, "rope_ctc_s0", 7.0), _run(live, "none_ctc_s0", 12.0)]
    study = tmp_path / "study"
    text = _gzip_table(study, runs)
    # the readers find a study's gzip table where it has no xz one
    assert runs_in(study) == ["none_ctc_s0", "rope_ctc_s0"]
    assert locate(study / "rope_ctc_s0" / "config.yaml").read_text() == "pe: rope\nseed: 0\n"
    assert [logical_path(p).name for p in find_run_dirs([study])] == ["none_ctc_s0", "rope_ctc_s0"]
    cli = [sys.executable, "-m", "asr_pe.results_table"]
    done = subprocess.run([*cli, "convert", str(study)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "6 files render as from results.jsonl.gz" in done.stdout
    assert [p.name for p in study.iterdir()] == [TABLE_NAME]
    # the same JSON lines, now xz (xzcat gives back what zcat gave)
    assert (study / TABLE_NAME).read_bytes()[:6] == b"\xfd7zXZ\x00" and lzma.decompress((study / TABLE_NAME).read_bytes()) == text
    assert all(render_run(rows)[rel] == (live / run / rel).read_text()
               for run, rows in read_table(study / TABLE_NAME).items() for rel in render_run(rows))
    # nothing left to convert, or both tables present: one line naming the file, exit 2, nothing changed
    again = subprocess.run([*cli, "convert", str(study)], cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 2 and again.stderr.startswith("error: ") and GZIP_TABLE_NAME in again.stderr
    _gzip_table(study, runs[:1])
    both = subprocess.run([*cli, "convert", str(study)], cwd=REPO, capture_output=True, text=True)
    assert both.returncode == 2 and "exists already" in both.stderr and "Traceback" not in both.stderr
    assert (study / GZIP_TABLE_NAME).is_file() and lzma.decompress((study / TABLE_NAME).read_bytes()) == text
    # and no reader picks one of two tables: it says which study holds both
    listed = subprocess.run([*cli, "list", str(study)], cwd=REPO, capture_output=True, text=True)
    assert listed.returncode == 2 and "holds both" in listed.stderr and len(listed.stderr.splitlines()) == 1
    with pytest.raises(ValueError, match="holds both"):
        add_runs(study / TABLE_NAME, runs[:1])


def test_adding_to_a_study_with_a_gzip_table_writes_xz_and_removes_the_gzip_one(tmp_path):
    live = tmp_path / "live"
    study = tmp_path / "study"
    _gzip_table(study, [_run(live, "rope_ctc_s0", 7.0)])
    add_runs(study / TABLE_NAME, [_run(live, "none_ctc_s0", 12.0)])
    assert [p.name for p in study.iterdir()] == [TABLE_NAME]          # the old runs kept, in xz only
    assert runs_in(study) == ["none_ctc_s0", "rope_ctc_s0"]
    assert render_run(read_table(study / TABLE_NAME)["rope_ctc_s0"])["config.yaml"] == "pe: rope\nseed: 0\n"


# ----------------------------------------------------------------------------- issue 43: the archive is a database of runs

def _evaluate_py_meta(test_set: str, *, remedy: str = "", mode: str = "full", step: int = 300,
                      sha: str = "35e4dea49afca9e4a8a2c558ee210977813591a712c1bd101b69003943e045ff") -> dict:
    """buckets.meta.json as evaluate.py writes it today (copied from the fine-tune archive's
    rope_finetune300_ctc_s3, eval/longform and eval/longform_window5): every evaluation records
    ``"remedy": ""`` in its settings; a remedy's also at the top level, chunked inference as
    ``mode``."""
    settings = {"batch_seconds": 300.0, "block_size": "auto", "chunk_s": 20.0, "decode": {"method": "greedy"},
                "device": "cpu", "edges": "doubling", "manifest_sha256": "b147c67d", "mode": mode, "n_boot": 1000,
                "overlap_s": 4.0, "remedy": remedy, "train_length_s": 5.0 if remedy else None}
    meta = {"block_size": "auto", "checkpoint": {"global_step": step, "name": "last.ckpt", "sha256": sha},
            "decode": {"beam": 10, "ctc_weight": 0.3, "length_penalty": 1.0, "max_len_ratio": 1.0, "method": "greedy"},
            "device": "cpu", "edges": "doubling: 0 2 4 8", "loss": "ctc", "manifest": f"/data/{test_set}.jsonl",
            "mode": mode, "pe": "rope", "run": "runs/x", "seconds": 1.0, "settings": settings,
            "test_set": test_set, "utterances": 2}
    if remedy:
        meta.update(remedy=remedy, train_length_s=5.0)
    return meta


def _evaluated_run(root: Path, name: str, *, arm: str = "", step: int = 300, sha: str = "ab" * 32) -> Path:
    """A run folder as train.py + evaluate.py leave it today: a plain decoding of test and
    longform, window and chunked decodings of longform."""
    run = _run(root, name, 7.0)
    info = json.loads((run / "run_info.json").read_text())
    (run / "run_info.json").write_text(json.dumps({**info, "arm": arm, "data": "synth", "encoder": "transformer",
                                                   "remedy": ""}, indent=2))
    for folder, test_set, kw in [("test", "test", {}), ("longform", "longform", {}),
                                 ("longform_window", "longform", {"remedy": "window"}),
                                 ("longform_chunked", "longform", {"mode": "chunked"})]:
        d = run / "eval" / folder
        if folder != "test":
            d.mkdir(parents=True)
            shutil.copy(run / "eval" / "test" / "buckets.csv", d / "buckets.csv")
            shutil.copy(run / "eval" / "test" / "per_utt.jsonl", d / "per_utt.jsonl")
        (d / "buckets.meta.json").write_text(json.dumps(_evaluate_py_meta(test_set, step=step, sha=sha, **kw),
                                                        indent=2, sort_keys=True) + "\n")
    return run


def test_an_evaluation_recording_an_empty_remedy_keeps_its_per_utterance_scores(tmp_path, monkeypatch):
    """Defect 1: ``"remedy": ""`` (every evaluation's settings) is the plain decoding; its
    per_utt.jsonl is archived, so the in-context ratio can be computed from the table. A remedy's
    and chunked inference's folders keep bucket tables only (as the committed tables do)."""
    run = _evaluated_run(tmp_path / "live", "rope_ctc_s0")
    study = tmp_path / "study"
    assert main(["add", str(study), str(run)]) == 0
    files = render_run(read_table(study / TABLE_NAME)["rope_ctc_s0"])
    assert "eval/test/per_utt.jsonl" in files and "eval/longform/per_utt.jsonl" in files
    assert "eval/longform_window/per_utt.jsonl" not in files and "eval/longform_chunked/per_utt.jsonl" not in files
    # where the study reads them: the set folders of <study>/<run>, found in the table
    monkeypatch.chdir(tmp_path)
    ids, _, _ = read_errors("study/rope_ctc_s0/eval/longform")
    assert ids == ["u0", "u1"]


# the studies archived with `results_table add ... --remedy-utts` (their READMEs; the backlog lane,
# recipes/synth/study/backlog.sh, for ladder/seed4, ladder/more_pes, cape_parts and transducer):
# every per_utt.jsonl their folders had is kept, the filter does not apply
REMEDY_UTTS_STUDIES = ("finetune", "finetune160", "ladder", "cape_parts", "transducer")
# (a study's sub-archives too: ladder/seed4/ is archived like ladder/)
FILTERED_TABLES = [t for t in TABLES if t.relative_to(STUDY).parts[0] not in REMEDY_UTTS_STUDIES]


@pytest.mark.parametrize("table", FILTERED_TABLES, ids=[str(t.parent.relative_to(STUDY)) for t in FILTERED_TABLES])
def test_the_committed_tables_hold_the_per_utterance_files_the_filter_keeps(table):
    """Re-archiving a committed study gives the same table: its eval folders hold per_utt.jsonl
    exactly where `is_remedy_result` keeps it."""
    for run, rows in read_table(table).items():
        files = render_run(rows)
        for rel, text in files.items():
            if rel.endswith("/buckets.meta.json"):
                meta = Path(rel).parent
                with tempfile.TemporaryDirectory() as tmp:
                    (Path(tmp) / "m.json").write_text(text)
                    dropped = is_remedy_result(Path(tmp) / "m.json")
                assert (f"{meta}/per_utt.jsonl" in files) != dropped, (run, rel)


REMEDY_UTTS_TABLES = [t for t in TABLES if t not in FILTERED_TABLES]


@pytest.mark.parametrize("table", REMEDY_UTTS_TABLES, ids=[str(t.parent.relative_to(STUDY)) for t in REMEDY_UTTS_TABLES])
def test_the_tables_archived_with_every_set_s_scores_hold_them_for_all_but_the_dev_ladder(table):
    """The studies archived through backlog.py's `stage` and `add --remedy-utts`: every eval folder
    holds its per-utterance scores except the dev ladder's (ladder_dev_*), which stage() leaves out."""
    for run, rows in read_table(table).items():
        files = render_run(rows)
        folders = {str(Path(rel).parent) for rel in files if rel.endswith("/buckets.meta.json")}
        assert folders, run
        for folder in folders:
            dev = Path(folder).name.startswith("ladder_dev_")
            assert (f"{folder}/per_utt.jsonl" in files) != dev, (run, folder)


def test_two_folders_of_one_name_are_refused_and_nothing_is_written(tmp_path, capsys):
    """Defect 2: two folders named rope_ctc_s0 in one add kept one and printed "2 run(s) added"."""
    a = _evaluated_run(tmp_path / "a", "rope_ctc_s0", arm="")
    b = _evaluated_run(tmp_path / "b", "rope_ctc_s0", arm="conformer")
    study = tmp_path / "study"
    assert main(["add", str(study), str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "both named 'rope_ctc_s0'" in err and len(err.splitlines()) == 1
    assert not (study / TABLE_NAME).exists() and a.exists() and b.exists()
    # the same folder named twice (by its path and through a link) is one run
    (tmp_path / "alias").symlink_to(tmp_path / "a")
    assert main(["add", str(study), str(a), str(tmp_path / "alias" / "rope_ctc_s0")]) == 0
    assert "1 run(s) added, 0 replaced" in capsys.readouterr().out


def test_a_name_the_table_holds_is_replaced_only_by_the_same_run(tmp_path, capsys):
    """The table keys runs by their identity (run_info's RUN_IDENTITY): another run under a name
    the table holds is refused (the old code replaced it without a word); the same run evaluated
    again with another checkpoint replaces its rows and says so; --replace replaces anyway."""
    study = tmp_path / "study"
    first = _evaluated_run(tmp_path / "a", "rope_ctc_s0", step=300, sha="ab" * 32)
    assert main(["add", str(study), str(first)]) == 0
    before = (study / TABLE_NAME).read_bytes()
    other = _evaluated_run(tmp_path / "b", "rope_ctc_s0", arm="conformer")
    assert main(["add", str(study), str(other)]) == 2
    err = capsys.readouterr().err
    assert "holds another run named 'rope_ctc_s0' (arm None -> 'conformer')" in err and "--replace" in err
    assert (study / TABLE_NAME).read_bytes() == before
    assert main(["add", str(study), str(first)]) == 0
    assert "rope_ctc_s0: unchanged" in capsys.readouterr().out and (study / TABLE_NAME).read_bytes() == before
    trained_further = _evaluated_run(tmp_path / "c", "rope_ctc_s0", step=600, sha="cd" * 32)
    assert main(["add", str(study), str(trained_further)]) == 0
    out = capsys.readouterr().out
    assert "rope_ctc_s0: replaced (results of step 300 (abababababab) -> step 600 (cdcdcdcdcdcd))" in out
    assert main(["add", str(study), str(other), "--replace"]) == 0
    assert run_identity(read_table(study / TABLE_NAME)["rope_ctc_s0"])["arm"] == "conformer"


def test_re_adding_a_run_never_drops_files_the_table_holds_for_it(tmp_path, capsys):
    """A study archived with --remedy-utts (the fine-tune control, the length ladder) reads the
    remedies' per-utterance scores; adding its runs again without the flag would drop them."""
    run = _evaluated_run(tmp_path / "live", "rope_ctc_s0")
    study = tmp_path / "study"
    assert main(["add", str(study), str(run), "--remedy-utts"]) == 0
    before = (study / TABLE_NAME).read_bytes()
    assert main(["add", str(study), str(run)]) == 2
    err = capsys.readouterr().err
    assert "eval/longform_chunked/per_utt.jsonl" in err and "--remedy-utts" in err
    assert (study / TABLE_NAME).read_bytes() == before
    assert main(["add", str(study), str(run), "--remedy-utts"]) == 0


ADD_WHEN_TOLD = """
import sys, time
from pathlib import Path
from asr_pe.results_table import main
go = Path(sys.argv[1])
while not go.exists():      # both processes start their add at the same moment
    time.sleep(0.001)
sys.exit(main(sys.argv[2:]))
"""


def test_concurrent_adds_all_land_and_remove_no_folder_the_table_lacks(tmp_path):
    """Defect 2: two `add --remove` at once, each of other runs, real processes started together,
    three rounds: every run is in the table, every removed folder's run among them (the old code
    lost runs in each try, and deleted the folders of runs it lost)."""
    study = tmp_path / "study"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    expected = set()
    for round_ in range(3):
        go = tmp_path / f"go{round_}"
        names = [f"pe{round_}{side}_ctc_s0" for side in "ab"]
        folders = [_evaluated_run(tmp_path / "live", n) for n in names]
        for f in folders:
            shutil.rmtree(f / "checkpoints")      # archive folders: --remove may delete them
            (f / "eval" / "test" / "buckets.md").unlink()
            for extra in (f / "eval").glob("*/buckets.md"):
                extra.unlink()
        procs = [subprocess.Popen([sys.executable, "-c", ADD_WHEN_TOLD, str(go), "add", str(study), str(f),
                                   "--remove", "--remedy-utts"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for f in folders]
        time.sleep(1.0)                          # both imported and waiting
        go.write_text("")
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        expected |= set(names)
        held = set(read_table(study / TABLE_NAME))
        removed = {f.name for f in folders if not f.exists()}
        assert removed <= held, f"round {round_}: folders of {sorted(removed - held)} deleted, runs not in the table"
        assert held == expected, f"round {round_}: lost {sorted(expected - held)}"
    assert sorted(p.name for p in study.iterdir()) == [TABLE_NAME]     # no lock file left behind


def test_a_writer_that_reads_the_table_while_another_adds_waits_for_it(tmp_path, monkeypatch, capsys):
    """The interleaving that lost runs, made deterministic: while this process's add has read the
    table, another `add --remove` runs. Under the lock it waits (and says so) and then adds to
    what this one wrote; the old code let it write and delete its folder, then wrote over it."""
    import asr_pe.results_table as rt

    study = tmp_path / "study"
    a, b = (_evaluated_run(tmp_path / "live", n) for n in ("rope_ctc_s0", "none_ctc_s0"))
    for f in (a, b):
        shutil.rmtree(f / "checkpoints")
        for md in (f / "eval").glob("*/buckets.md"):
            md.unlink()
    add_runs(study / TABLE_NAME, [_run(tmp_path / "earlier", "cape_ctc_s0", 9.0)])   # the table exists
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    real_read, other = rt.read_table, []

    def read_while_another_adds(path):
        runs = real_read(path)
        if not other:
            other.append(subprocess.Popen([sys.executable, "-m", "asr_pe.results_table", "add", str(study), str(b),
                                           "--remove", "--remedy-utts"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
            # until it waits for the lock, or (without one) has done its whole add
            line = other[0].stderr.readline()
            assert line == "" or "waiting for another writer" in line, line
            if line == "":
                other[0].wait(timeout=120)
        return runs

    monkeypatch.setattr(rt, "read_table", read_while_another_adds)
    assert main(["add", str(study), str(a), "--remove", "--remedy-utts"]) == 0
    assert other, "the table was never read"
    _, err = other[0].communicate(timeout=120)
    assert other[0].returncode == 0, err
    held = set(real_read(study / TABLE_NAME))
    assert {f.name for f in (a, b) if not f.exists()} <= held
    assert held == {"cape_ctc_s0", "rope_ctc_s0", "none_ctc_s0"}


def test_remove_deletes_a_folder_only_once_the_table_is_on_disk_and_read_back(tmp_path, monkeypatch, capsys):
    """--remove: the table's bytes and its directory entry are fsynced, the table is read back,
    then the folders go. A failure in between (the directory's fsync fails: the new table may not
    survive a crash) keeps every folder, exit 2; the old code never synced the directory."""
    import asr_pe.results_table as rt

    study = tmp_path / "study"
    run = _evaluated_run(tmp_path / "live", "rope_ctc_s0")
    shutil.rmtree(run / "checkpoints")
    for md in (run / "eval").glob("*/buckets.md"):
        md.unlink()
    events = []
    real_fsync, real_read, real_rmtree = os.fsync, rt.read_table, shutil.rmtree

    def fsync(fd):
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        events.append(("fsync_dir" if target.is_dir() else "fsync", target))
        if target.is_dir() and fail_dir_sync:
            raise OSError(5, "Input/output error (simulated)")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(rt, "read_table", lambda p: events.append(("read", Path(p))) or real_read(p))
    monkeypatch.setattr(shutil, "rmtree", lambda p, *a, **k: events.append(("rmtree", Path(p))) or real_rmtree(p, *a, **k))
    fail_dir_sync = True
    assert main(["add", str(study), str(run), "--remove", "--remedy-utts"]) == 2
    assert "Input/output error" in capsys.readouterr().err and run.exists()
    events.clear()
    fail_dir_sync = False
    assert main(["add", str(study), str(run), "--remove", "--remedy-utts"]) == 0
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "rmtree" and events[-1][1] == run
    # the table written (its temporary file fsynced), its folder fsynced, the table read back, then the removal
    last_write = max(i for i, (k, p) in enumerate(events) if k == "fsync" and p.name.startswith(f".{TABLE_NAME}."))
    dir_sync = kinds.index("fsync_dir", last_write)
    read_back = kinds.index("read", dir_sync)
    assert events[dir_sync][1] == study and events[read_back][1] == study / TABLE_NAME
    assert read_back < len(kinds) - 1 and not run.exists()


def test_drop_removes_exactly_the_runs_named_and_refuses_a_name_the_table_lacks(tmp_path):
    study = tmp_path / "study"
    for name, cer in [("rope_ctc_s3", 7.0), ("rope_ctc_s4", 6.0), ("none_ctc_s3", 9.0)]:
        _run(study, name, cer)
    add_runs(study / TABLE_NAME, sorted(p.parent for p in study.glob("*/run_info.json")))
    before = read_table(table_of(study))
    cli = [sys.executable, "-m", "asr_pe.results_table"]
    env_kw = dict(cwd=REPO, capture_output=True, text=True)
    bad = subprocess.run([*cli, "drop", str(study), "rope_ctc_s3", "rope_ctc_s9"], **env_kw)
    assert bad.returncode == 2 and "no run rope_ctc_s9 to drop" in bad.stderr and "Traceback" not in bad.stderr
    assert read_table(table_of(study)) == before            # nothing written: rope_ctc_s3 is still there
    ok = subprocess.run([*cli, "drop", str(study), "rope_ctc_s3", "none_ctc_s3"], **env_kw)
    assert ok.returncode == 0, ok.stderr
    assert f"rope_ctc_s3: {len(before['rope_ctc_s3'])} rows removed" in ok.stdout
    after = read_table(table_of(study))
    assert after == {"rope_ctc_s4": before["rope_ctc_s4"]}   # the other run's rows, every one, unchanged
