"""Study figures from fake run dirs: the family map, the faceted figure and its ratio panel, the
per-PE remedy figure, and the script."""

import importlib.util
import json
import math
from pathlib import Path

import pytest
import yaml
from matplotlib.legend import Legend

from asr_pe.evaluation.buckets import write_bucket_files
from asr_pe.plots import length_figures as lf
from asr_pe.plots.wer_vs_length import aggregate, load_runs

REPO = Path(__file__).resolve().parents[2]
SHORT = [("0-2", 0, 2, 1.5), ("2-4", 2, 4, 3.0), ("32-64", 32, 64, 45.0)]
LONG = [("128-256", 128, 256, 158.0)]


def write_set(run: Path, test_set: str, buckets, cers, meta=None):
    rows = [{"bucket": b, "lo": float(lo), "hi": float(hi), "utterances": 5, "mean_duration": dur,
             "ref_words": 100, "errors": 0, "sub": 0, "del": 0, "ins": 0, "wer": cer * 4,
             "wer_ci_low": cer * 4 - 2, "wer_ci_high": cer * 4 + 2, "ref_chars": 500, "char_errors": 0,
             "cer": cer, "cer_ci_low": cer - 1, "cer_ci_high": cer + 1}
            for (b, lo, hi, dur), cer in zip(buckets, cers)]
    rows.append(dict(rows[-1], bucket="all", lo=0.0, hi=math.inf))
    write_bucket_files(rows, run / "eval" / test_set, meta=meta)


def fake_run(root: Path, pe: str, seed: int, short_cers, long_cer, *, encoder="transformer", remedy="") -> Path:
    run = root / f"{pe}{'_' + remedy.split(':')[0] if remedy else ''}_{encoder}_s{seed}"
    write_set(run, "test", SHORT, short_cers)
    write_set(run, "longform", LONG, [long_cer])
    label = f"{pe}/ctc" + (f" {remedy}" if remedy else "") + ("" if encoder == "transformer" else f" {encoder}")
    (run / "run_info.json").write_text(json.dumps(
        {"pe": pe, "loss": "ctc", "encoder": encoder, "seed": seed, "train_max_duration": 5.0,
         "remedy": remedy, "label": label}))
    return run


@pytest.fixture()
def study(tmp_path):
    root = tmp_path / "runs"
    fake_run(root, "none", 0, [11.0, 10.0, 11.0], 12.0)
    fake_run(root, "none", 1, [12.0, 10.0, 12.0], 11.0)
    fake_run(root, "sinusoidal", 0, [9.0, 8.0, 10.0], 12.0)
    fake_run(root, "sinusoidal", 1, [9.0, 10.0, 11.0], 11.0)
    fake_run(root, "rope", 0, [6.0, 8.0, 16.0], 24.0)
    fake_run(root, "rope", 1, [7.0, 6.0, 14.0], 28.0)
    fake_run(root, "alibi", 0, [7.0, 7.0, 8.0], 9.0)
    return root


@pytest.fixture(autouse=True)
def low_dpi(monkeypatch):
    monkeypatch.setattr(lf, "DPI", 40)      # the same figures, drawn in a fraction of the time


def load_script():
    spec = importlib.util.spec_from_file_location("plot_study_figures", REPO / "scripts" / "plot_study_figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def is_png(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def series(root, metric="cer"):
    return (aggregate(load_runs([root], "test")[0], metric), aggregate(load_runs([root], "longform")[0], metric))


def test_the_family_map_covers_every_configured_pe_and_combinations_go_by_their_attention_stage():
    names = [yaml.safe_load(p.read_text())["name"] for p in sorted((REPO / "conf" / "pe").glob("*.yaml"))]
    assert len(names) >= 13
    unknown = [n for n in names if lf.pe_family(n) == lf.OTHER]
    assert not unknown, f"PEs no registered PE class explains: {unknown}"
    assert {lf.pe_family(n) for n in names} == {lf.REFERENCE, *lf.FAMILY_ORDER[:-1]}
    assert lf.pe_family("rope") == "q/k rotation" and lf.pe_family("rem") == "after softmax"
    assert lf.pe_family("cape+rope") == "q/k rotation" and lf.pe_family("sinusoidal+relative") == "logit bias"
    assert lf.pe_family("conv+rem") == "after softmax" and lf.pe_family("learned+none") == "input"
    assert lf.pe_family("fancy_new_pe") == lf.OTHER and lf.pe_family("cape+fancy") == lf.OTHER


def test_ratios_are_long_over_reference_of_the_seed_means_with_the_per_seed_range(study):
    short, long = series(study)
    ratios = {r.label: r for r in lf.long_short_ratios(short, long, ref_bucket="2-4")}
    assert set(ratios) == {"none/ctc", "sinusoidal/ctc", "rope/ctc", "alibi/ctc"}
    rope = ratios["rope/ctc"]
    assert rope.ratio == pytest.approx(26.0 / 7.0)                       # mean(24, 28) / mean(8, 6)
    assert sorted(rope.per_seed) == pytest.approx(sorted([24.0 / 8.0, 28.0 / 6.0]))
    assert (rope.low, rope.high) == pytest.approx((3.0, 28.0 / 6.0))
    alibi = ratios["alibi/ctc"]                                         # one seed: no spread
    assert alibi.ratio == pytest.approx(9.0 / 7.0) and alibi.per_seed == [pytest.approx(9 / 7)]
    listed = lf.long_short_ratios(short, long, ref_bucket="0-2")
    assert [r.ratio for r in listed] == sorted(r.ratio for r in listed)   # sorted by ratio
    assert listed[-1].ratio == pytest.approx(26.0 / 6.5)
    with pytest.raises(ValueError, match="reference bucket '8-16'"):
        lf.long_short_ratios(short, long, ref_bucket="8-16")


def test_faceted_figure_has_a_panel_per_family_present_and_the_ratio_panel(study, tmp_path):
    short, long = series(study)
    path = tmp_path / "cer_by_family.png"
    fig = lf.plot_faceted(short, long, path, "cer")
    assert is_png(path) and not list(tmp_path.glob(".*tmp*"))
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [lf.FAMILY_TITLES[f] for f in ("input", "q/k rotation", "logit bias")] + ["CER 160 s / CER 2-4 s (different content)"]
    for ax in fig.axes[:3]:                       # none is the reference in every family panel
        assert "none (ref.)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == ["none (ref.)", "rope"]
    ratio_ax = fig.axes[-1]
    assert [t.get_text() for t in ratio_ax.get_yticklabels()][-1] == "rope"     # largest ratio on top
    assert "min–max of the per-seed ratios (no per-utterance scores or parts)" in ratio_ax.get_xlabel()


def write_per_utt(run: Path, test_set: str, utts):
    """(duration, CER %) per utterance of 100 characters -> run/eval/<test_set>/per_utt.jsonl."""
    lines = [json.dumps({"id": f"u{i}", "duration": d, "errors": 0, "ref_words": 20,
                         "char_errors": round(cer), "ref_chars": 100}) for i, (d, cer) in enumerate(utts)]
    (run / "eval" / test_set / "per_utt.jsonl").write_text("\n".join(lines) + "\n")


def test_ratio_whiskers_are_the_bootstrap_ci_where_runs_have_per_utterance_scores(study, tmp_path):
    # every utterance of a bucket at the bucket's CER: each draw gives the point, the CI is exact
    for seed, (cer_24, cer_long) in enumerate([(8.0, 24.0), (6.0, 28.0)]):
        run = study / f"rope_transformer_s{seed}"
        write_per_utt(run, "test", [(1.5, 50.0)] * 3 + [(3.0, cer_24)] * 5 + [(45.0, 90.0)] * 2)
        write_per_utt(run, "longform", [(158.0, cer_long)] * 4)
    short, long = series(study)
    # the CI needs the parts: which reference utterances (u3..u7) each recording holds
    parts = {"rope/ctc": {"u0": ["u3", "u4"], "u1": ["u5"], "u2": ["u6", "u7"], "u3": ["u0"]}}
    ratios = {r.label: r for r in lf.long_short_ratios(short, long, ref_bucket="2-4", parts=parts)}
    rope = ratios["rope/ctc"]
    assert rope.is_ci and (rope.low, rope.high) == pytest.approx((26.0 / 7.0, 26.0 / 7.0))
    assert not ratios["none/ctc"].is_ci and ratios["none/ctc"].low < ratios["none/ctc"].high
    # without parts, no CI: the sets may overlap
    assert not {r.label: r for r in lf.long_short_ratios(short, long, ref_bucket="2-4")}["rope/ctc"].is_ci
    fig = lf.plot_faceted(short, long, tmp_path / "cer_by_family.png", "cer")
    assert "min–max of the per-seed ratios (no per-utterance scores or parts)" in fig.axes[-1].get_xlabel()


def test_facets_by_family_put_none_in_each_and_by_encoder_split_the_encoders(study):
    fake_run(study, "rope", 0, [5.0, 5.0, 6.0], 7.0, encoder="conformer")
    short, _ = series(study)
    by_family = {f: [s.label for s in m] for f, m in lf.facet_members(short, "family").items()}
    assert by_family == {"input": ["none/ctc", "sinusoidal/ctc"],
                         "q/k rotation": ["none/ctc", "rope/ctc conformer", "rope/ctc"],
                         "logit bias": ["none/ctc", "alibi/ctc"]}
    by_encoder = {f: [s.label for s in m] for f, m in lf.facet_members(short, "encoder").items()}
    assert by_encoder == {"transformer": ["alibi/ctc", "none/ctc", "rope/ctc", "sinusoidal/ctc"],
                          "conformer": ["rope/ctc conformer"]}
    only_none = [s for s in short if s.label == "none/ctc"]
    assert list(lf.facet_members(only_none)) == [lf.REFERENCE]
    with pytest.raises(ValueError, match="facet must be one of"):
        lf.facet_members(short, "loss")


def test_facet_by_arm_gives_a_panel_per_arm_and_a_pe_one_colour_in_every_panel(study, tmp_path):
    for pe, seed in (("none", 0), ("sinusoidal", 0), ("sinusoidal", 1)):
        run = fake_run(study / "frontend70", pe, seed, [20.0, 15.0, 30.0], 40.0)
        info = json.loads((run / "run_info.json").read_text())
        info.update(arm="frontend70", label=f"{pe}/ctc [frontend70]")
        (run / "run_info.json").write_text(json.dumps(info))
    short, long = series(study)
    by_arm = {f: [s.label for s in m] for f, m in lf.facet_members(short, "arm").items()}
    assert by_arm == {lf.MAIN_ARM: ["alibi/ctc", "none/ctc", "rope/ctc", "sinusoidal/ctc"],
                      "frontend70": ["none/ctc [frontend70]", "sinusoidal/ctc [frontend70]"]}
    fig = lf.plot_faceted(short, long, tmp_path / "cer_by_arm.png", "cer", "arm")
    assert [ax.get_title() for ax in fig.axes[:2]] == [f"arm: {lf.MAIN_ARM}", "arm: frontend70"]

    def colours(ax):
        return {t.get_text(): h.get_color() for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    study_panel, arm_panel = colours(fig.axes[0]), colours(fig.axes[1])
    assert study_panel["sinusoidal"] == arm_panel["sinusoidal [frontend70]"]
    assert study_panel["rope"] != study_panel["sinusoidal"] != study_panel["alibi"]
    with pytest.raises(ValueError, match="facet must be one of"):
        lf.plot_faceted(short, long, tmp_path / "x.png", "cer", "loss")


def add_remedy(run: Path, folder: str, remedy: str, short_cers, long_cer, *, chunked=False):
    for name, buckets, cers in (("test", SHORT, short_cers), ("longform", LONG, [long_cer])):
        how = {"mode": "chunked", "chunk_s": 20.0} if chunked else {"remedy": remedy}
        meta = {"decode": {"method": "greedy"}, **how}
        write_set(run, f"{name}_{folder}", buckets, cers, meta=meta)


def test_remedy_figure_has_one_line_per_remedy(study, tmp_path):
    for seed in (0, 1):
        run = study / f"rope_transformer_s{seed}"
        add_remedy(run, "window", "window", [6.0, 7.0, 8.0], 9.0 + seed)
        add_remedy(run, "chunked", "", [6.5, 7.0, 9.0], 10.0, chunked=True)
    fake_run(study, "rope", 0, [6.0, 6.0, 9.0], 12.0, remedy="posscale:1-32")
    fig = lf.plot_remedies([study], "rope", tmp_path / "remedies_rope_cer.png", "cer")
    assert is_png(tmp_path / "remedies_rope_cer.png")
    ax = fig.axes[0]
    remedy_legend = next(c for c in ax.get_children()
                         if isinstance(c, Legend) and c.get_title().get_text().startswith("remedy"))
    legend = [t.get_text() for t in remedy_legend.get_texts()]        # plain first, then by long-form CER
    assert legend == ["plain (2 seeds): 26.0 % at 160 s", "window (2 seeds): 9.5 % at 160 s",
                      "chunked:20 (2 seeds): 10.0 % at 160 s", "posscale:1-32 (1 seed): 12.0 % at 160 s"]
    assert len([line for line in ax.get_lines() if not line.get_label().startswith("_")]) == 4
    with pytest.raises(ValueError, match="no run with pe 'shaw'"):
        lf.plot_remedies([study], "shaw", tmp_path / "x.png")


def test_script_writes_the_figures_and_fails_in_one_line(study, tmp_path, capsys):
    script = load_script()
    out = tmp_path / "figs"
    fake_run(study, "rope", 0, [5.0, 5.0, 6.0], 7.0, encoder="conformer")
    assert script.main(["--runs", str(study), "--out", str(out), "--facet", "encoder", "--metric", "wer",
                        "--remedies-for", "rope"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["remedies_rope_wer.png", "wer_by_encoder.png"]
    assert all(is_png(p) for p in out.iterdir())
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    assert script.main(["--runs", str(tmp_path / "empty"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no run directories") and "\n" not in err
