"""Study summary tables from fake run dirs: seed means, per-seed values, ratios, attention means."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe.evaluation.buckets import write_bucket_files
from asr_pe.plots.study_summary import (
    accuracy_table, attention_table, decodings_table, difference_table, remedy_table,
)

REPO = Path(__file__).resolve().parents[2]
SHORT = [("0-2", 0, 2, 1.5), ("2-4", 2, 4, 3.0), ("32-64", 32, 64, 45.0)]
LONG = [("128-256", 128, 256, 158.0)]


def write_set(run: Path, test_set: str, buckets, cers, wer_factor=4.0, method=None):
    rows = [{"bucket": b, "lo": float(lo), "hi": float(hi), "utterances": 5, "mean_duration": dur,
             "ref_words": 100, "errors": 0, "sub": 0, "del": 0, "ins": 0, "wer": cer * wer_factor,
             "wer_ci_low": 0.0, "wer_ci_high": 100.0, "ref_chars": 500, "char_errors": 0, "cer": cer,
             "cer_ci_low": cer - 1, "cer_ci_high": cer + 1}
            for (b, lo, hi, dur), cer in zip(buckets, cers)]
    rows.append(dict(rows[-1], bucket="all", lo=0.0, hi=math.inf))
    write_bucket_files(rows, run / "eval" / test_set, meta={"decode": {"method": method}} if method else None)


def fake_run(root: Path, pe: str, seed: int, short_cers, long_cer, attention=None, loss="ctc") -> Path:
    run = root / f"{pe}_{loss}_s{seed}"
    write_set(run, "test", SHORT, short_cers)
    write_set(run, "longform", LONG, [long_cer])
    (run / "run_info.json").write_text(json.dumps(
        {"pe": pe, "loss": loss, "seed": seed, "train_max_duration": 5.0, "label": f"{pe}/{loss}"}))
    if attention:
        lines = ["test_set,bucket,utt,duration,frames,layer,head,mean_distance_s,entropy,norm_entropy,local_mass"]
        lines += [f"test,{b},u{i},{dur},10,0,0,{dist},1.0,0.5,{local}" for i, (b, dur, dist, local) in enumerate(attention)]
        (run / "attention_stats").mkdir()
        (run / "attention_stats" / "attention_stats.csv").write_text("\n".join(lines) + "\n")
    return run


@pytest.fixture()
def study(tmp_path):
    root = tmp_path / "runs"
    fake_run(root, "rope", 0, [6.0, 8.0, 16.0], 24.0,
             attention=[("2-4", 3.0, 0.6, 0.8), ("2-4", 3.0, 0.3, 0.6), ("32-64", 40.0, 12.0, 0.2)])
    fake_run(root, "rope", 1, [7.0, 6.0, 14.0], 28.0)
    fake_run(root, "none", 0, [11.0, 10.0, 11.0], 12.0,
             attention=[("2-4", 3.0, 1.0, 0.3), ("32-64", 40.0, 13.0, 0.03)])
    return root


def _rows(table: str) -> dict[str, list[str]]:
    lines = [line.strip("| ").split(" | ") for line in table.strip().splitlines()]
    return {cells[0]: cells for cells in lines[2:]}


def test_accuracy_table_seed_means_per_seed_values_and_ratios(study):
    table = accuracy_table([study], short_set="test", long_set="longform", buckets=["0-2", "2-4", "32-64"],
                           ref_bucket="2-4", long_bucket="128-256")
    header = table.splitlines()[0]
    assert "CER 160 s" in header and "32-64 / 2-4" in header and "160 s / 2-4" in header
    rows = _rows(table)
    assert list(rows) == ["rope", "none"]                     # by 2-4 s CER: 7.0 before 10.0
    rope = rows["rope"]
    assert "in-context 160 s" in header.split(" | ")[2]       # the lead column
    assert rope[1] == "0, 1" and rope[2] == "–"               # no per-utterance scores: no in-context ratio
    assert rope[3:7] == ["6.5 (6.0, 7.0)", "7.0 (8.0, 6.0)", "15.0 (16.0, 14.0)", "26.0 (24.0, 28.0)"]
    assert rope[7:9] == [f"{15 / 7:.2f}×", f"{26 / 7:.2f}×"]  # ratios of the seed means
    assert rope[9:12] == ["28.0", "60.0", "104.0"]            # WER = 4 × CER in the fakes
    assert rows["none"][3:9] == ["11.0", "10.0", "11.0", "12.0", "1.10×", "1.20×"]


def _word(errors: int) -> str:
    """A 9-character word with ``errors`` substituted characters (the reference is 'aaaaaaaaa')."""
    return "b" * errors + "a" * (9 - errors)


def _text_records(folder: Path, records):
    """(id, duration, ref, hyp) -> folder/per_utt.jsonl with the counts evaluate.py writes."""
    from asr_pe.evaluation.scoring import score_record
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_utt.jsonl").write_text("".join(json.dumps(score_record(*r)) + "\n" for r in records))


def test_in_context_leads_and_the_cross_set_ci_needs_the_parts(study, tmp_path):
    """rope's seeds: u0..u4 (3 s, the 2-4 s bucket) and v0 (1 s) decoded alone with a errors each
    too; the three recordings [u0, u1], [u2, u3], [u4, v0] decoded whole with three times the
    errors in every part. The in-context ratio is 3 in every recording, so its CI is exactly 3;
    the cross-set ratio gets the clustered CI with the parts and none without them."""
    from asr_pe.evaluation.length_ratio import length_ratio_ci
    parts = {"r0": ["u0", "u1"], "r1": ["u2", "u3"], "r2": ["u4", "v0"]}
    for seed, a in ((0, 1), (1, 2)):
        run = study / f"rope_ctc_s{seed}"
        alone = {f"u{i}": a for i in range(5)} | {"v0": a}
        _text_records(run / "eval" / "test", [(u, 3.0 if u != "v0" else 1.0, "aaaaaaaaa", _word(e))
                                              for u, e in alone.items()])
        _text_records(run / "eval" / "longform", [
            (rid, 158.0, " ".join(["aaaaaaaaa"] * len(ids)), " ".join(_word(3 * alone[u]) for u in ids))
            for rid, ids in parts.items()])
    parts_file = tmp_path / "parts.json"
    parts_file.write_text(json.dumps(parts))
    kwargs = dict(short_set="test", long_set="longform", buckets=["0-2", "2-4", "32-64"], ref_bucket="2-4",
                  long_bucket="128-256")
    rows = _rows(accuracy_table([study], parts_path=parts_file, **kwargs))
    assert rows["rope"][2] == "3.00× [3.00, 3.00]" and rows["none"][2] == "–"
    ci = length_ratio_ci([study / f"rope_ctc_s{s}" / "eval" / "test" for s in (0, 1)],
                         [study / f"rope_ctc_s{s}" / "eval" / "longform" for s in (0, 1)],
                         ref_lo=2, ref_hi=4, parts=parts)
    # (the point comes from the fakes' buckets.csv, the CI from these per-utterance records)
    assert rows["rope"][8] == f"{26 / 7:.2f}× [{ci[0]:.2f}, {ci[1]:.2f}]"
    assert ci == pytest.approx(((9 / 19) / (1.5 / 9),) * 2)   # seed means: 6a/19 long, a/9 short
    assert rows["none"][8] == "1.20×"                         # no per-utterance scores: no CI
    # without the parts (and no manifest that names them) neither the in-context ratio nor a CI
    rows = _rows(accuracy_table([study], **kwargs))
    assert rows["rope"][2] == "–" and rows["rope"][8] == f"{26 / 7:.2f}×"


def _write_per_utt(run: Path, test_set: str, utts):
    """utts: (duration, CER %) per utterance, 100 characters each, ids u0, u1, ..."""
    lines = [json.dumps({"id": f"u{i}", "duration": d, "errors": 0, "ref_words": 20, "char_errors": round(c),
                         "ref_chars": 100}) for i, (d, c) in enumerate(utts)]
    (run / "eval" / test_set / "per_utt.jsonl").write_text("\n".join(lines) + "\n")


def _relabel(run: Path, label: str, **info) -> Path:
    path = run / "run_info.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), label=label, **info)))
    return run


def test_difference_table_compares_each_pe_with_the_reference_of_its_own_encoder(study, tmp_path):
    arm = tmp_path / "arm"
    _relabel(fake_run(arm, "rope", 0, [3.0, 3.0, 3.5], 5.0), "rope/ctc [conformer]", encoder="conformer")
    _relabel(fake_run(arm, "none", 0, [3.0, 2.0, 3.0], 3.0), "none/ctc [conformer]", encoder="conformer")
    _relabel(fake_run(arm, "cape", 0, [3.0, 2.5, 3.0], 3.0), "cape/ctc [frontend70]", arm="frontend70")
    rows = _rows(difference_table([study, arm], reference_pe="none", short_set="test", long_set="longform",
                                  ref_bucket="2-4"))
    # no per-utterance scores: the plain difference of seed means, (8 + 6) / 2 - 10 and 26 - 12
    assert rows["rope"][1:] == ["none", "-3.00", "+14.00"]
    assert rows["rope/ctc [conformer]"][1:] == ["none/ctc [conformer]", "+1.00", "+2.00"]
    assert "cape/ctc [frontend70]" not in rows and "none" not in rows   # no reference of its arm; itself
    # per-utterance scores on the same utterances: a constant per-utterance gap gives an exact CI
    for run, (c24, clong) in {"rope_ctc_s0": (8.0, 24.0), "rope_ctc_s1": (6.0, 28.0), "none_ctc_s0": (10.0, 12.0)}.items():
        _write_per_utt(study / run, "test", [(3.0, c24)] * 5 + [(1.0, 70.0)] * 2)
        _write_per_utt(study / run, "longform", [(158.0, clong)] * 3)
    rows = _rows(difference_table([study], reference_pe="none", short_set="test", long_set="longform",
                                  ref_bucket="2-4"))
    assert rows["rope"][2:] == ["-3.00 [-3.00, -3.00]", "+14.00 [+14.00, +14.00]"]
    with pytest.raises(ValueError, match="no runs of the reference PE 'relative'"):
        difference_table([study], reference_pe="relative", short_set="test", long_set="longform", ref_bucket="2-4")


def test_attention_table_averages_rows_per_bucket_and_skips_runs_without_stats(study):
    rows = _rows(attention_table([study], buckets=["2-4", "32-64"]))
    assert list(rows) == ["rope", "none"]                     # by distance at 2-4 s
    # rope: only seed 0 has stats; 2-4 s is the mean of two rows
    assert rows["rope"][1:] == ["0.45 s (0.15)", "12.00 s (0.30)", "0.70", "0.20"]
    assert rows["none"][1:] == ["1.00 s (0.33)", "13.00 s (0.33)", "0.30", "0.03"]


def test_script_prints_both_tables_and_writes_the_file(study, tmp_path):
    out = tmp_path / "summary.md"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "study_summary.py"), str(study),
                           "--attention-buckets", "2-4", "32-64", "--attention-names", "short", "long",
                           "--compare-to", "none", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == proc.stdout
    assert proc.stdout.count("| PE |") == 3 and "| distance short | distance long |" in proc.stdout
    assert "| rope | none | -3.00 | +14.00 |" in proc.stdout                # --compare-to none
    bad = subprocess.run([sys.executable, str(REPO / "scripts" / "study_summary.py"), str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "no such run or sweep directory" in bad.stderr


def test_a_bad_attention_row_names_the_file_and_line(study):
    path = study / "none_ctc_s0" / "attention_stats" / "attention_stats.csv"
    path.write_text(path.read_text() + "test,2-4,u9,3.0,10,0,0,oops,1.0,0.5,0.3\n")
    with pytest.raises(ValueError, match=rf"{path}:4: bad attention_stats row"):
        attention_table([study], buckets=["2-4"])


def test_a_reference_bucket_outside_the_shown_buckets_is_refused(study):
    with pytest.raises(ValueError, match="reference bucket '8-16' must be one of the buckets"):
        accuracy_table([study], short_set="test", long_set="longform", buckets=["0-2", "2-4"], ref_bucket="8-16")


def test_decodings_table_has_a_row_per_model_and_decoding_and_the_long_form_beside_its_decoding(tmp_path):
    root = tmp_path / "runs"
    for pe, seed, cers in (("rope", 0, [4.0, 3.0, 90.0]), ("rope", 1, [6.0, 5.0, 96.0]), ("none", 0, [17.0, 33.0, 94.0])):
        run = fake_run(root, pe, seed, cers, 99.0, loss="hybrid")        # eval/test: attention decoding
        write_set(run, "test", SHORT, cers, method="attention")
        write_set(run, "test_ctc", SHORT, [c / 10 for c in cers], method="greedy")
        write_set(run, "longform_ctc", LONG, [cers[-1] / 5], method="greedy")
    table = decodings_table([root], sets=["test", "test_ctc"], long_set="longform_ctc", long_bucket="128-256")
    lines = table.strip().splitlines()
    assert lines[0] == "| label | set | seeds | 0-2 s | 2-4 s | 32-64 s | 160 s |"
    rows = [line.strip("| ").split(" | ") for line in lines[2:]]
    # grouped by PE (first seen: none sorts first among the run dirs), sets in the order given
    assert [r[:3] for r in rows] == [["none/hybrid+attention", "test", "0"], ["none/hybrid+greedy", "test_ctc", "0"],
                                     ["rope/hybrid+attention", "test", "0, 1"], ["rope/hybrid+greedy", "test_ctc", "0, 1"]]
    # seed mean [mean CI bounds] (per-seed values); the long-form CER only where the label has one
    assert rows[2][3:] == ["5.0 [4.0, 6.0] (4.0, 6.0)", "4.0 [3.0, 5.0] (3.0, 5.0)", "93.0 [92.0, 94.0] (90.0, 96.0)", "–"]
    assert rows[3][6] == "18.6 [17.6, 19.6] (18.0, 19.2)"
    assert rows[1][3:] == ["1.7 [0.7, 2.7]", "3.3 [2.3, 4.3]", "9.4 [8.4, 10.4]", "18.8 [17.8, 19.8]"]


def test_remedy_table_has_a_row_per_pe_and_remedy_with_ratio_and_cost(study):
    """Inference remedies (eval/<set>_<remedy> with the remedy in the meta file), chunked inference
    and a training remedy (run_info.json) each get a row; seeds pooled; the cost is the 2-4 s CER
    against the same PE's plain model."""
    for seed, (ref, long) in enumerate([(8.5, 9.0), (7.5, 8.0)]):
        run = study / f"rope_ctc_s{seed}"
        for name, buckets, cers in (("test", SHORT, [6.0, ref, 9.0]), ("longform", LONG, [long])):
            write_set(run, f"{name}_window", buckets, cers)
            meta = run / "eval" / f"{name}_window" / "buckets.meta.json"
            meta.write_text(json.dumps({"decode": {"method": "greedy"}, "remedy": "window"}))
            write_set(run, f"{name}_chunked", buckets, [c + 1 for c in cers])
            (run / "eval" / f"{name}_chunked" / "buckets.meta.json").write_text(
                json.dumps({"mode": "chunked", "chunk_s": 20.0}))
    run = study / "rope_ctc_s0"                          # a remedy evaluated on seed 0 only
    for name, buckets, cers in (("test", SHORT, [6.0, 8.0, 9.0]), ("longform", LONG, [9.0])):
        write_set(run, f"{name}_window10", buckets, cers)
        (run / "eval" / f"{name}_window10" / "buckets.meta.json").write_text(json.dumps({"remedy": "window:10"}))
    trained = fake_run(study, "rope_posscale", 0, [6.0, 9.0, 10.0], 12.0)
    info = json.loads((trained / "run_info.json").read_text())
    (trained / "run_info.json").write_text(json.dumps(dict(info, pe="rope", remedy="posscale:1-32")))
    table = remedy_table([study])
    rows = {(cells[0], cells[1]): cells for cells in
            (line.strip("| ").split(" | ") for line in table.strip().splitlines()[2:])}
    assert set(rows) == {("rope", "(none)"), ("rope", "window"), ("rope", "chunked:20"), ("rope", "posscale:1-32"),
                         ("rope", "window:10"), ("none", "(none)")}
    assert rows[("rope", "window:10")][7] == "+0.0"     # 8.0 against seed 0's 8.0, not the mean 7.0
    window = rows[("rope", "window")]
    assert window[2] == "0, 1" and window[3].startswith("8.0 [7.0, 9.0]")  # seed mean of 8.5 and 7.5
    assert window[5].startswith("8.5 [7.5, 9.5]") and window[6] == "1.06×"  # 8.5 / 8.0
    assert window[7] == "+1.0"  # 8.0 against the plain rope's (8.0 + 6.0) / 2 = 7.0
    # the training remedy has seed 0 only: against the plain seed 0 (8.0), not the seed mean (7.0)
    assert rows[("rope", "posscale:1-32")][3].startswith("9.0") and rows[("rope", "posscale:1-32")][7] == "+1.0"
    assert rows[("rope", "(none)")][7] == "+0.0"
    assert rows[("rope", "chunked:20")][5].startswith("9.5")


def test_a_run_whose_attention_shares_are_not_distributions_is_left_out_and_named(study):
    # REM's archived statistics were of its mixed weights (softmax plus a signed recurrence matrix):
    # shares of -0.07 and 2.03 in one run; its means looked like a local share of 0.78
    path = study / "none_ctc_s0" / "attention_stats" / "attention_stats.csv"
    path.write_text(path.read_text() + "test,2-4,u9,3.0,10,1,2,1.0,1.0,0.5,2.025\n")
    table = attention_table([study], buckets=["2-4", "32-64"])
    assert list(_rows(table.split("\n\n")[0])) == ["rope"]
    assert table.rstrip().endswith("Left out: none (a share of attention of 2.025: the weights of layer 1, head 2 "
                                   "are not distributions)")
