"""PE diagnostics: scripts/plot_pe.py writes a non-empty PNG for every registered PE, and the
plotted quantities are the mathematics they claim to show."""

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from asr_pe.models.positional import available_pes, build_positional
from asr_pe.models.positional.t5 import t5_bucket
from asr_pe.plots import pe_diagnostics as diag

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--length", "12", "--d-model", "16", "--n-heads", "2", "--draws", "2"]


def load_script():
    spec = importlib.util.spec_from_file_location("plot_pe_script", ROOT / "scripts" / "plot_pe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def is_png(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


REGISTERED = ["none"] + available_pes()["input"] + available_pes()["attention"]


@pytest.mark.parametrize("name", REGISTERED)
def test_script_writes_png_for_every_registered_pe(name, tmp_path, capsys):
    script = load_script()
    assert script.main([name, "--out", str(tmp_path)] + TINY) == 0
    printed = [Path(line) for line in capsys.readouterr().out.split()]
    assert printed and all(p.parent == tmp_path and is_png(p) for p in printed)
    assert sorted(tmp_path.glob("*.png")) == sorted(printed)  # no temporary files left behind


def test_combination_and_options(tmp_path, capsys):
    script = load_script()
    assert script.main(["cape+rope", "--out", str(tmp_path)] + TINY) == 0
    names = {p.name for p in tmp_path.glob("*.png")}
    assert {"cape_jitter.png", "rope_decay.png"} <= names
    # an option of the PE, parsed as a literal, goes to its constructor
    assert script.main(["t5", "--out", str(tmp_path / "c"), "--option", "causal=true", "--option", "max_distance=64"]
                       + TINY) == 0
    assert script.parse_args(["t5", "--option", "causal=true", "--option", "max_distance=64", "--length", "9"]) == {
        "pe": "t5", "T": 9, "options": {"causal": True, "max_distance": 64}}


def test_bad_arguments_are_clear(tmp_path, capsys):
    script = load_script()
    assert script.main(["nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "unknown positional encoding 'nope'" in err
    for bad, says in ((["rope", "--option", "max_distance"], "expected KEY=VALUE"),
                      (["rope", "--length", "abc"], "invalid int value"), (["rope", "T=12"], "unrecognized")):
        with pytest.raises(SystemExit) as stop:  # argparse's usage errors: exit 2
            script.main(bad)
        assert stop.value.code == 2 and says in capsys.readouterr().err
    assert script.main(["rope", "--out", str(tmp_path), "--option", "no_such_option=1"] + TINY) == 2
    assert "unknown option" in capsys.readouterr().err


def test_rem_branch_explains_when_rem_is_missing(tmp_path, capsys, monkeypatch):
    script = load_script()
    monkeypatch.setattr(script, "available_pes", lambda: {"input": [], "attention": ["rope"]})
    assert script.main(["rem", "--out", str(tmp_path)] + TINY) == 2
    assert "'rem' is not registered" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.png"))


def test_cli_runs_as_a_script(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_pe.py"), "alibi", "--out", str(tmp_path)] + TINY,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert is_png(tmp_path / "alibi_bias.png")


# ----- the quantities behind the figures
def test_sinusoid_similarity_is_dot_product_of_pe():
    pe = build_positional("sinusoidal", d_model=16, n_heads=2, n_layers=1).input
    sim = diag.input_similarity(pe, 10, 16)
    # PE_p·PE_q = Σ_k cos((p − q)ω_k): D/2 on the diagonal, Toeplitz
    assert torch.allclose(sim.diagonal(), torch.full((10,), 8.0), atol=1e-5)
    assert torch.allclose(sim[1:, 1:], sim[:-1, :-1], atol=1e-4)
    w = [10000 ** (-2 * k / 16) for k in range(8)]
    assert math.isclose(float(sim[0, 3]), sum(math.cos(3 * x) for x in w), rel_tol=1e-5)


def test_conv_similarity_uses_content_signal():
    pe = build_positional("conv", d_model=16, n_heads=2, n_layers=1, kernel=3).input
    sim = diag.input_similarity(pe, 10, 16, cosine=True)
    assert torch.allclose(sim.diagonal(), torch.ones(10), atol=1e-5)  # not the all-zero pe(0)


def test_rope_decay_values():
    pe = build_positional("rope", d_model=16, n_heads=2, n_layers=1).layer(0)
    curves = diag.rope_decay(pe, 50, n_samples=64)
    d = 8
    theta = [10000 ** (-2 * k / d) for k in range(d // 2)]
    for n in (0, 1, 7, 50):  # q = k = 1: |Σ_k 2cos(nθ_k)| / d
        assert math.isclose(float(curves["constant"][n]), abs(sum(2 * math.cos(n * t) for t in theta)) / d,
                            rel_tol=1e-4, abs_tol=1e-6)
    assert float(curves["random"][0]) == pytest.approx(1.0, rel=0.3)  # E|q|²/d = 1
    assert curves["random"][40:].mean() < curves["random"][0]


def test_t5_curve_and_bias_maps_come_from_the_module():
    pe = build_positional("t5", d_model=16, n_heads=2, n_layers=1).layer(0)
    c = diag.t5_bucket_curve(pe, 150)
    assert torch.equal(c["bucket"], t5_bucket(c["offset"]))
    assert torch.equal(c["bias"][:, 150 + 64], pe.table.detach()[30])
    al = build_positional("alibi", d_model=16, n_heads=2, n_layers=1).layer(0)
    b = diag.bias_map(al, 9, 8, 2)
    assert torch.allclose(b[0, 2], -0.0625 * (torch.arange(9) - 2).abs().float())
    # with only a bias, the generic score map is the constant-content term plus that bias
    s = diag.attention_score_map(al, 9, 8, 2)
    assert torch.allclose(s - b, (s - b)[:, :1, :1].expand_as(s), atol=1e-5)


def test_cape_draws_eval_and_train():
    pe = build_positional("cape", d_model=16, n_heads=2, n_layers=1).input
    pe.train()
    d = diag.cape_draws(pe, 20, 3)
    assert pe.training  # the mode is restored
    assert torch.allclose(d["eval"], (torch.arange(20) - 9.5) * 0.04, atol=1e-6)
    assert d["train"].shape == (3, 20) and not torch.allclose(d["train"][0], d["train"][1])


@pytest.mark.skipif("rem" not in available_pes()["attention"], reason="rem PE not present")
def test_rem_kernels_are_the_module_matrices():
    pe = build_positional("rem", d_model=16, n_heads=2, n_layers=1).layer(0)
    p = diag.rem_kernels(pe, 10)
    assert p.shape == (2, 10, 10)
    assert torch.allclose(p, pe.rem_matrix(torch.arange(10), torch.arange(10)).detach().float())
    assert torch.all(p.diagonal(dim1=-2, dim2=-1) == 0)


def test_rem_kernels_without_public_method_is_clear():
    with pytest.raises(diag.DiagnosticsError, match="rem_matrix"):
        diag.rem_kernels(torch.nn.Module(), 5)
