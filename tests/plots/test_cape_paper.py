"""asr_pe/plots/cape_paper.py: what the CAPE paper did, said once for the figures' captions and the
corpus recipes' RESULTS templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_pe.plots import cape_paper

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("recipe", ["librispeech", "tedlium3"])
def test_the_results_templates_print_the_paper_s_setup_from_the_one_table(recipe):
    results = (REPO / "recipes" / recipe / "RESULTS.md").read_text()
    assert cape_paper.setup_markdown() in results
    assert "36 post-LN Transformer layers, d 768" in results and "Adagrad" in results


def test_a_caption_says_what_the_paper_did_where_its_numbers_are_and_the_recipe_s_note():
    for kind in cape_paper.KINDS:
        text = cape_paper.caption(kind, "Here: LibriSpeech.")
        assert "arXiv 2106.03143" in text and "not quoted here" in text and text.endswith("Here: LibriSpeech.")
    assert "5 s duration bins" in cape_paper.caption("natural_bins")
    assert "sox tempo -s 1.2" in cape_paper.caption("tempo") and "STFT hop" in cape_paper.caption("hop_ms")
    with pytest.raises(AssertionError, match="no CAPE-paper caption"):
        cape_paper.caption("doubling")


def test_a_caption_goes_under_the_panels_wrapped():
    from matplotlib.figure import Figure

    fig = Figure()
    cape_paper.add_caption(fig, None)
    assert fig._supxlabel is None   # no caption asked for: the figure as before
    cape_paper.add_caption(fig, cape_paper.caption("tempo", "x " * 100))
    lines = fig._supxlabel.get_text().splitlines()
    assert len(lines) >= 3 and max(map(len, lines)) <= 150 and lines[0].startswith("The CAPE paper's rate test")
