"""The dose-response figure and table from fake runs decoded on a tiny ladder index."""

import json
from pathlib import Path

import pytest

from asr_pe.evaluation.in_context import InContextError
from asr_pe.evaluation.scoring import score_record
from asr_pe.plots.dose_response import dose_response_markdown, ladder_series, plot_dose_response

UTTS = [f"u{i}" for i in range(4)]


def word(errors: int) -> str:
    return "b" * errors + "a" * (9 - errors)


def write_records(folder: Path, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_utt.jsonl").write_text("".join(json.dumps(score_record(*r)) + "\n" for r in records))


@pytest.fixture()
def index(tmp_path):
    """One pool (test) of 4 utterances; rungs of 2 and 4 utterances; variants nogap and gap500ms."""
    idx = {"sets": {"test": {"alone": str(tmp_path / "ladder_test_alone.jsonl"), "recordings": {}}}}
    for variant in ("nogap", "gap500ms"):
        idx["sets"]["test"]["recordings"][variant] = {}
        for rung, n in (("2", 2), ("4", 4)):
            path = tmp_path / f"ladder_test_{variant}_{rung}.jsonl"
            rows = [{"id": f"{variant}{rung}_{j}", "parts": [{"id": u, "start": k, "end": k + 1}
                                                            for k, u in enumerate(UTTS[j * n:(j + 1) * n])]}
                    for j in range(4 // n)]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            idx["sets"]["test"]["recordings"][variant][rung] = str(path)
    return idx


def fake_run(root: Path, pe: str, seed: int, factor: dict, index) -> Path:
    """Each utterance has 1 error alone and factor[rung] errors inside a recording of that rung."""
    run = root / f"{pe}_ctc_s{seed}"
    (run / "eval").mkdir(parents=True)
    (run / "run_info.json").write_text(json.dumps({"pe": pe, "loss": "ctc", "seed": seed, "label": f"{pe}/ctc"}))
    write_records(run / "eval" / "ladder_test_alone", [(u, 2.5, "aaaaaaaaa", word(1)) for u in UTTS])
    for variant, rungs in index["sets"]["test"]["recordings"].items():
        for rung, path in rungs.items():
            n = int(rung)
            write_records(run / "eval" / Path(path).stem, [
                (f"{variant}{rung}_{j}", float(rung), " ".join(["aaaaaaaaa"] * n), " ".join([word(factor[rung])] * n))
                for j in range(4 // n)])
    return run


def test_series_table_and_figure(tmp_path, index):
    root = tmp_path / "runs"
    fake_run(root, "rope", 0, {"2": 2, "4": 4}, index)
    fake_run(root, "rope", 1, {"2": 2, "4": 6}, index)
    fake_run(root, "none", 0, {"2": 1, "4": 1}, index)
    (root / "untouched_ctc_s0").mkdir()                      # a run never decoded on the ladder: left out
    (root / "untouched_ctc_s0" / "run_info.json").write_text(json.dumps({"pe": "x", "loss": "ctc", "seed": 0}))
    series = ladder_series([root], index, n_boot=200)
    assert set(series) == {"rope/ctc", "none/ctc"}
    rope = series["rope/ctc"]
    assert rope[("nogap", 2.0)].ratio == pytest.approx(2.0) and rope[("nogap", 4.0)].ratio == pytest.approx(5.0)
    assert rope[("nogap", 4.0)].extra == {"seeds": 2}
    assert series["none/ctc"][("gap500ms", 4.0)].ratio == pytest.approx(1.0)
    table = dose_response_markdown(series)
    assert "### gap500ms" in table and "### nogap" in table
    nogap = table.split("### nogap")[1].splitlines()
    assert nogap[2] == "| PE | seeds | 2 s | 4 s |"
    assert nogap[4].startswith("| rope | 2 | 2.00 [2.00, 2.00] | 5.00 [")      # largest ratio first
    fig = plot_dose_response(series, tmp_path / "dose.png")
    assert (tmp_path / "dose.png").is_file()
    assert [ax.get_title() for ax in fig.axes] == ["joins: gap500ms", "joins: nogap"]
    assert sorted(line.get_label() for line in fig.axes[1].get_lines() if not line.get_label().startswith("_")) \
        == ["none", "rope"]


def test_no_run_on_the_ladder_is_a_clear_error(tmp_path, index):
    root = tmp_path / "runs" / "a_ctc_s0"
    root.mkdir(parents=True)
    (root / "run_info.json").write_text(json.dumps({"pe": "a", "loss": "ctc", "seed": 0}))
    with pytest.raises(InContextError, match="no run .* was decoded on every set of the ladder's test pool"):
        ladder_series([tmp_path / "runs"], index)
