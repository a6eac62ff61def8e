"""Shaw's key bias is laid out by rows or gathered (`asr_pe.models.positional.shaw.row_layout_wins`):
on a GPU always by rows, whose gradient is a sum over repeats, never the gather's scatter-add into
2k+1 slots per row (contended atomics: a bf16 T = 4000 step took 21x `none` on an H100)."""

import pytest
import torch

from asr_pe.models.positional import shaw as shaw_mod
from asr_pe.models.positional.shaw import ROW_LAYOUT_MAX_KEYS_GRAD, ShawPE, row_layout_wins


def test_the_gather_is_kept_only_for_a_long_cpu_backward():
    n = ROW_LAYOUT_MAX_KEYS_GRAD
    assert not row_layout_wins(True, n, "cpu") and not row_layout_wins(True, 4000, "cpu")
    assert row_layout_wins(True, n - 1, "cpu") and row_layout_wins(False, 4000, "cpu")
    assert row_layout_wins(True, 4000, "cuda") and row_layout_wins(True, n, "cuda")


def _bias_and_grads(pe, q, use_rows, monkeypatch):
    monkeypatch.setattr(shaw_mod, "row_layout_wins", lambda *a: use_rows)
    pe.zero_grad()
    q = q.detach().requires_grad_()
    pos = torch.arange(q.size(2), device=q.device)
    bias = pe.logits_bias(q, pos, pos)
    (bias * torch.linspace(-1, 1, bias.size(-1), device=q.device, dtype=bias.dtype)).sum().backward()
    return bias.detach(), q.grad, pe.key_table.grad.clone()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_both_layouts_give_the_same_bias_and_gradients(device, monkeypatch):
    torch.manual_seed(0)
    # float64: the two layouts sum each table gradient's ~800 terms in other orders, and fp32's rounding
    # of those sums (one entry 1.3e-4 apart on an H200, 2026-11-28) is not what this test is about
    pe = ShawPE(32, 2, max_distance=8).to(device, torch.float64)
    q = torch.randn(2, 2, ROW_LAYOUT_MAX_KEYS_GRAD + 32, 16, device=device, dtype=torch.float64)
    rows = _bias_and_grads(pe, q, True, monkeypatch)
    gathered = _bias_and_grads(pe, q, False, monkeypatch)
    for a, b in zip(rows, gathered):
        torch.testing.assert_close(a, b)
