"""The dose-response figure and table from fake runs decoded on a tiny ladder index, and the
length study's committed tables regenerated from its archive and ladder composition."""

import json
import re
import runpy
import shlex
import time
from pathlib import Path

import pytest

from asr_pe.evaluation.in_context import InContextError
from asr_pe.evaluation.scoring import score_record
from asr_pe.plots.dose_response import dose_response_markdown, ladder_series, plot_dose_response

REPO = Path(__file__).resolve().parents[2]
LADDER_STUDY = REPO / "recipes" / "synth" / "study" / "ladder"
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


def _readme_commands() -> list[list[str]]:
    """The `plot_dose_response.py` command lines of the ladder study's README (backslash
    continuations joined), as argument lists after the script."""
    text = re.sub(r"\\\n\s*", " ", (LADDER_STUDY / "README.md").read_text(encoding="utf-8"))
    return [shlex.split(line.split("scripts/plot_dose_response.py", 1)[1])
            for line in text.splitlines() if "python scripts/plot_dose_response.py" in line]


def _output_name(args: list[str]) -> str:
    """The table a command writes: dose_response_<pool><suffix>.md (scripts/plot_dose_response.py)."""
    value = {k: args[args.index(k) + 1] for k in ("--pool", "--suffix") if k in args}
    return f"dose_response_{value.get('--pool', 'test')}{value.get('--suffix', '')}.md"


COMMITTED = sorted(LADDER_STUDY.glob("dose_response_*.md"))


def test_every_committed_ladder_table_has_its_command_in_the_readme():
    assert [p.name for p in COMMITTED] == ["dose_response_test.md", "dose_response_test_window2p5.md"]
    assert sorted(_output_name(a) for a in _readme_commands()) == [p.name for p in COMMITTED]


@pytest.mark.parametrize("committed", COMMITTED, ids=[p.name for p in COMMITTED])
def test_committed_ladder_tables_are_what_the_archive_and_composition_give(committed, tmp_path, monkeypatch):
    """recipes/synth/study/ladder/dose_response_test*.md, regenerated by the README's command from
    the archived per-utterance scores (results.jsonl.xz) and the ladder's composition
    (ladder_composition.jsonl.xz), without the 1.3 GB ladder: identical byte for byte (the
    figures are written too, not compared). Both run in this process: the scoring of 72 sets
    of 20-640 recordings is a few seconds, the imports of a second process as much again."""
    args = next(a for a in _readme_commands() if _output_name(a) == committed.name)
    assert args[args.index("--ladder") + 1] == "recipes/synth/study/ladder/ladder_composition.jsonl.xz"
    args[args.index("--out") + 1] = str(tmp_path)
    monkeypatch.chdir(REPO)
    main = runpy.run_path(str(REPO / "scripts" / "plot_dose_response.py"), run_name="dose_response_script")["main"]
    start, cpu = time.perf_counter(), time.process_time()
    assert main(args) == 0
    assert (tmp_path / committed.name).read_bytes() == committed.read_bytes()
    assert (tmp_path / committed.name).with_suffix(".png").stat().st_size > 10_000
    print(f"{committed.name}: regenerated in {time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s CPU)")
