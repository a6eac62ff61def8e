"""Dose-response from a run's ladder results: per (variant, rung) in-context ratios, alone results
shared across rungs, a setting chosen on dev by the stated rule, and the table."""

import json
import math
from pathlib import Path

import pytest

from asr_pe.evaluation.ladder_report import (choose_on_dev, dose_response_table, pool_runs, run_ladder,
                                             whole_rate)
from asr_pe.evaluation.scoring import score_record

UTTS = [f"u{i}" for i in range(4)]


def word(errors: int) -> str:
    return "b" * errors + "a" * (9 - errors)


def write_records(folder: Path, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_utt.jsonl").write_text("".join(json.dumps(score_record(*r)) + "\n" for r in records))


def make_ladder(tmp_path: Path) -> dict:
    """An index of one pool: 4 utterances; rungs of 2 and 4 utterances; one variant."""
    index = {"sets": {"dev": {"alone": str(tmp_path / "ladder_dev_alone.jsonl"), "recordings": {"nogap": {}}}}}
    for rung, n in (("2", 2), ("4", 4)):
        path = tmp_path / f"ladder_dev_nogap_{rung}.jsonl"
        rows = [{"id": f"r{rung}_{j}", "parts": [{"id": u, "start": k, "end": k + 1}
                                                 for k, u in enumerate(UTTS[j * n:(j + 1) * n])]}
                for j in range(4 // n)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        index["sets"]["dev"]["recordings"]["nogap"][rung] = str(path)
    return index


def write_run(run: Path, alone_errors, whole_errors, suffix=""):
    """alone_errors[i]: errors of u_i alone; whole_errors[rung][i]: errors of u_i inside the rung's recording."""
    if alone_errors is not None:
        write_records(run / "eval" / f"ladder_dev_alone{suffix}", [(u, 1.0, "aaaaaaaaa", word(e))
                                                                   for u, e in zip(UTTS, alone_errors)])
    for rung, n in (("2", 2), ("4", 4)):
        errs = whole_errors[rung]
        write_records(run / "eval" / f"ladder_dev_nogap_{rung}{suffix}", [
            (f"r{rung}_{j}", float(rung), " ".join(["aaaaaaaaa"] * n),
             " ".join(word(errs[i]) for i in range(j * n, (j + 1) * n))) for j in range(4 // n)])


def test_in_context_ratio_per_rung_with_shared_alone_decodings(tmp_path):
    index = make_ladder(tmp_path)
    write_run(tmp_path / "run", [1, 1, 1, 1], {"2": [1, 1, 2, 2], "4": [3, 3, 3, 3]})
    res = run_ladder(tmp_path / "run", index, "dev", n_boot=100)
    assert sorted(res) == [("nogap", 2.0), ("nogap", 4.0)]
    assert res[("nogap", 2.0)].ratio == pytest.approx(6 / 4) and len(res[("nogap", 2.0)].rows) == 2
    assert res[("nogap", 4.0)].ratio == pytest.approx(3.0) and len(res[("nogap", 4.0)].rows) == 1
    # the same utterances alone: the same errors (the rate differs by the join spaces counted)
    assert [sum(r.alone_char_errors for r in res[k].rows) for k in sorted(res)] == [4, 4]
    table = dose_response_table(res)
    assert table.splitlines()[2].startswith("| 2 | 2 |") and "3.00× [3.00, 3.00]" in table.splitlines()[3]
    # a setting's folders (suffix) without alone results of their own: the plain alone decodings
    write_run(tmp_path / "run", None, {"2": [1, 1, 1, 1], "4": [1, 1, 1, 1]}, suffix="_window5")
    res_w = run_ladder(tmp_path / "run", index, "dev", suffix="_window5", n_boot=100)
    assert res_w[("nogap", 4.0)].ratio == pytest.approx(1.0)
    # seeds pooled per rung
    pooled = pool_runs([res, res_w], n_boot=100)
    assert pooled[("nogap", 4.0)].ratio == pytest.approx((12 + 4) / (4 + 4))


def test_choice_on_dev_is_the_lowest_whole_rate_of_the_rule(tmp_path):
    index = make_ladder(tmp_path)
    write_run(tmp_path / "run", [1, 1, 1, 1], {"2": [1, 1, 1, 1], "4": [5, 5, 5, 5]})
    write_run(tmp_path / "run", [1, 1, 1, 1], {"2": [4, 4, 4, 4], "4": [2, 2, 2, 2]}, suffix="_a")
    cands = {"": run_ladder(tmp_path / "run", index, "dev", n_boot=10),
             "a": run_ladder(tmp_path / "run", index, "dev", suffix="_a", n_boot=10)}
    # every rung: plain 24 errors, a 24 errors over 4·9 + 2 + 4·9 + 3 characters: a tie, the first wins
    chosen, rates = choose_on_dev(cands, variant="nogap")
    assert chosen == "" and rates[""] == rates["a"] == pytest.approx(100 * 24 / 77)
    # only the 4 s rung counts: a is better there
    chosen, rates = choose_on_dev(cands, variant="nogap", min_rung=4)
    assert chosen == "a" and rates == {"": pytest.approx(100 * 20 / 39), "a": pytest.approx(100 * 8 / 39)}
    assert math.isnan(whole_rate(cands[""], variant="gap500ms"))
    with pytest.raises(ValueError, match="no candidate has dev results"):
        choose_on_dev(cands, variant="gap500ms")
