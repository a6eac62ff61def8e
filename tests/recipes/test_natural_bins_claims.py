"""recipes/synth/study/natural_bins: the CAPE paper's length figure on the embedded corpus. Its
table is what the figure's code makes of the archived runs today, and every number its README
prints is checked (recipes/synth/claims_natural_bins.py), so a number edited by hand is caught."""

from __future__ import annotations

import runpy
from pathlib import Path

from asr_pe.plots.natural_bins import natural_bins_report

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "recipes" / "synth" / "study" / "natural_bins"
CLAIMS = runpy.run_path(str(REPO / "recipes" / "synth" / "claims_natural_bins.py"))


def _note() -> str:
    """The --note of the README's command."""
    text = (FOLDER / "README.md").read_text()
    return text.split('--note "', 1)[1].split('"', 1)[0]


def test_the_archived_table_is_what_the_archived_runs_give(tmp_path):
    from asr_pe.plots import cape_paper

    files = natural_bins_report([REPO / "recipes" / "synth" / "study" / "runs"], tmp_path, test_set="test",
                                caption=cape_paper.caption("natural_bins", _note()))
    for name in ("natural_bins.md", "natural_bins.csv", "natural_bins_runs.csv"):
        assert (tmp_path / name).read_text() == (FOLDER / name).read_text(), name
    assert files["png"].stat().st_size > 100_000


def test_every_number_of_the_readme_agrees_and_an_edited_one_is_caught():
    from asr_pe.plots.results_claims import check_claims

    claims, readme = CLAIMS["NATURAL_BINS_CLAIMS"], (FOLDER / "README.md").read_text()
    assert check_claims(readme, claims, None) == []
    edited = readme.replace("12.7 %", "11.7 %")
    assert edited != readme
    assert [f.name for f in check_claims(edited, claims, None)] == ["RoPE 0-5 / 60-65"]
