"""scripts/plan_run.py (asr_pe.bench.run_plan) on a tiny config: the extrapolation to the full
model and batch reproduces what a direct count of that model gives (FLOPs are exact, so the
layer and batch scaling is checked to the FLOP), the checkpoint holds weights and both AdamW
moments, and the CSV has a row per PE. No timing or memory thresholds: memory is only checked
to be measured (positive)."""

import csv
import importlib.util
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from asr_pe.bench import run_plan

ROOT = Path(__file__).resolve().parents[2]
TINY = ["encoder.d_model=32", "encoder.n_heads=2", "encoder.ffn_dim=64", "encoder.n_layers=5",
        "data.train_max_duration=3", "data.max_batch_seconds=10"]


def _script():
    spec = importlib.util.spec_from_file_location("plan_run", ROOT / "scripts" / "plan_run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plan_run_extrapolates_to_the_configured_model_and_batch(tmp_path, capsys):
    script = _script()
    assert script.main(["--experiment", "cape_librispeech_smoke", "--pes", "none", "rope",
                        "--extra", *TINY, "--checkpoint-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "| none |" in printed and "| rope |" in printed
    rows = list(csv.DictReader((tmp_path / "out" / "run_plan_cape_librispeech_smoke.csv").open()))
    assert [r["pe"] for r in rows] == ["none", "rope"]
    assert not list(tmp_path.glob("*.ckpt"))  # the checkpoint written for weighing is gone

    sections = script.compose_sections("cape_librispeech_smoke", "rope", TINY)
    model = run_plan._model(sections, 5, run_plan.CHAR_VOCAB)
    params = sum(p.numel() for p in model.parameters())
    row = rows[1]
    assert int(row["parameters"]) == params and int(row["layers"]) == 5
    assert int(row["batch_utterances"]) == 3  # floor(10 s / 3 s)
    # weights + exp_avg + exp_avg_sq in fp32, plus the pickle's keys and step counters
    assert 12 * params <= int(row["checkpoint_bytes"]) <= 12 * params + 200_000
    assert int(row["state_bytes"]) == 16 * params
    assert float(row["act_mib_per_layer_utt"]) > 0
    assert 0 <= float(row["quadratic_share"]) <= 1

    # the full model at the full batch, counted directly: the extrapolated FLOPs and saved
    # activation bytes agree with it (both are exact counts, so the layer and batch scaling is
    # checked, not assumed)
    cpu = torch.device("cpu")
    batch = run_plan._batch(sections, 3, 3.0, run_plan.CHAR_VOCAB, cpu)
    counter, saved = FlopCounterMode(display=False), run_plan.SavedTensors(model)
    with counter:
        run_plan._step(model.train(), batch, "32-true", cpu, saved)
    direct_tflop = counter.get_total_flops() / 1e12
    assert abs(float(row["tflop_per_step"]) - direct_tflop) <= 1e-3 * direct_tflop  # 4 digits in the CSV
    # activations: an upper bound, close; tensors a batch shares (PE tables, masks) are counted
    # once per utterance by the extrapolation (6 % of this d=32 model, far less at d=768)
    assert saved.nbytes <= int(row["activation_bytes"]) <= 1.1 * saved.nbytes
    assert int(row["step_bytes"]) == int(row["activation_bytes"]) + int(row["state_bytes"])


def test_saved_tensors_count_activations_not_parameters():
    lin = torch.nn.Linear(256, 256)
    x = torch.randn(64, 256, requires_grad=True)
    saved = run_plan.SavedTensors(lin)
    with saved.hooks():
        y = torch.relu(lin(x))
    y.sum().backward()
    # the input of the linear layer (64 x 256 fp32) and relu's output are saved; the weight is not
    assert saved.nbytes == 2 * 64 * 256 * 4


def test_plan_run_refuses_decreasing_counts(capsys):
    script = _script()
    try:
        script.parse_args(["--experiment", "cape_librispeech", "--layers", "2", "1"])
    except SystemExit as e:
        assert e.code == 2
    assert "--layers takes two increasing counts" in capsys.readouterr().err
