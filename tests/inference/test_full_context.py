"""Full-context long-form encoding: the front end in time chunks and the encoder in query
blocks give the plain path's output (1e-5) for every PE, gradients agree too, no tensor of
T × T entries is ever created for a long input, and the block size is sized and restored."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from asr_pe.inference.full_context import (
    auto_block_size,
    encode_full,
    frontend_in_chunks,
    resolve_block_size,
)
from asr_pe.models import build_encoder
from asr_pe.models.asr import build_asr_model
from asr_pe.models.frontend import Conv1dSubsampling, Conv2dSubsampling
from asr_pe.models.positional import available_pes

PES = available_pes()
ALL = ["none", *PES["input"], *PES["attention"], "cape+rope", "conv+rem"]
D, H = 16, 4


def pe_spec(name):
    # the learned table must hold the input (its length policy has its own tests)
    return {"input": {"name": "learned", "max_len": 4096}} if name == "learned" else name


def tiny_model(pe, seed=0, layers=2, frontend=None):
    torch.manual_seed(seed)
    return build_asr_model(
        vocab_size=12, in_features=20, frontend=frontend or {"kind": "conv2d", "channels": 8},
        encoder={"kind": "conformer", "d_model": D, "n_heads": H, "n_layers": layers, "ffn_dim": 32,
                 "conv_kernel": 5, "dropout": 0.0},
        pe=pe_spec(pe),
    ).eval()


@pytest.mark.parametrize("frontend", [
    Conv2dSubsampling(20, D, channels=6, factor=4),
    Conv2dSubsampling(20, D, channels=6, factor=6),
    Conv2dSubsampling(20, D, channels=6, factor=8),
    Conv1dSubsampling(20, D),
    Conv2dSubsampling(20, D, channels=6, context_kernel=5),
    Conv1dSubsampling(20, D, context_kernel=3),
], ids=["conv2d_4", "conv2d_6", "conv2d_8", "conv1d", "conv2d_ctx5", "conv1d_ctx3"])
@pytest.mark.parametrize("chunk", [3, 13])
def test_frontend_in_chunks_equals_whole(frontend, chunk):
    torch.manual_seed(0)
    frontend.eval()
    g = torch.Generator().manual_seed(1)
    feats, lengths = torch.randn(3, 157, 20, generator=g), torch.tensor([157, 120, 40])
    with torch.no_grad():
        ref, ref_len = frontend(feats, lengths)
        out, out_len = frontend_in_chunks(frontend, feats, lengths, chunk_frames=chunk)
    assert torch.equal(out_len, ref_len)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_encode_full_equals_plain_encode_for_every_pe(name):
    """Blocks of 7 and 32 rows (T' = 75 is a multiple of neither) and front-end chunks of 11
    encoder frames, on a padded batch: equal to ``model.encode`` on valid and padded frames."""
    model = tiny_model(name)
    g = torch.Generator().manual_seed(2)
    feats, lengths = torch.randn(3, 303, 20, generator=g), torch.tensor([303, 251, 64])
    with torch.no_grad():
        ref, ref_len = model.encode(feats, lengths)
        for block in (7, 32):
            out, out_len = encode_full(model, feats, lengths, block_size=block, frontend_chunk=11)
            assert torch.equal(out_len, ref_len)
            torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5, msg=lambda m, block=block: f"block {block}: {m}")
    assert all(layer.attn.block_size is None for layer in model.encoder.layers), "block size not restored"


@pytest.mark.parametrize("name", ["none", "cape", "conv", "rope", "alibi", "t5", "shaw", "relative", "rem"])
def test_blocked_backward_equals_unblocked(name):
    """Blocked attention is also exact for training: same gradients for every parameter."""
    torch.manual_seed(0)
    enc = build_encoder("conformer", pe_spec(name), d_model=D, n_heads=H, n_layers=2, ffn_dim=32, conv_kernel=5,
                        dropout=0.0).eval()  # eval: CAPE's random augmentation off, grads still flow
    g = torch.Generator().manual_seed(3)
    x, lengths = torch.randn(2, 29, D, generator=g), torch.tensor([29, 18])
    proj = torch.randn(2, 29, D, generator=g)
    grads = []
    for block in (None, 6):
        enc.set_block_size(block)
        enc.zero_grad(set_to_none=True)
        out, _ = enc(x, lengths)
        (out * proj).sum().backward()
        grads.append({n: p.grad.clone() for n, p in enc.named_parameters()})
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], atol=1e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an op returns."""

    def __init__(self):
        super().__init__()
        self.numel, self.op = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > self.numel:
                self.numel, self.op = t.numel(), str(func)
        return out


@pytest.mark.parametrize("name", ["none", "rope", "alibi", "t5", "shaw", "relative", "rem"])
def test_no_t_by_t_tensor_for_long_inputs(name):
    """T' = 600 encoder frames in blocks of 16: nothing as large as T'² is ever allocated
    (one head's full score matrix), so memory is O(T·block), not O(T²)."""
    model = tiny_model(name, layers=1)
    n_feat = 4 * 600 + 3
    feats, lengths = torch.randn(1, n_feat, 20), torch.tensor([n_feat])
    with torch.no_grad(), LargestTensor() as probe:
        out, out_len = encode_full(model, feats, lengths, block_size=16, frontend_chunk=150)
    T = int(out_len[0])
    assert T == 600 and torch.isfinite(out).all()
    assert probe.numel < T * T, f"{name}: {probe.op} made a tensor of {probe.numel} elements (T² = {T * T})"


def test_auto_block_size():
    # one (1, 4, block, 90 000) fp32 score tensor in ~128 MiB: 128·2²⁰ / (4·4·90 000) = 93 rows
    assert auto_block_size(90_000, 4, 1, budget_mb=128) == 93
    assert auto_block_size(90_000, 4, 2, budget_mb=128) == 46
    assert auto_block_size(500, 4) is None  # fits in one block: unblocked
    assert auto_block_size(10**9, 4) == 16  # never below the minimum block
    assert resolve_block_size("auto", 90_000, 4) == 93
    assert resolve_block_size(None, 90_000, 4) is None
    assert resolve_block_size(64, 10, 4) == 64
    for bad in (-1, "big"):
        with pytest.raises(ValueError, match="block_size"):
            resolve_block_size(bad, 100, 4)


def test_the_default_budget_is_128_mib_on_cpu_and_a_share_of_the_card_on_a_gpu(monkeypatch):
    from types import SimpleNamespace

    from asr_pe.inference import full_context

    assert full_context.default_budget_mb("cpu") == 128
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=80 * 2**30))
    assert full_context.default_budget_mb("cuda:0") == 80 * 1024 / 32  # 2560 MiB on an 80 GB card
    # a 60-minute recording on that card: blocks of 1,864 rows instead of 93
    assert auto_block_size(90_000, 4, 1, budget_mb=full_context.default_budget_mb("cuda")) == 1864
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=2**30))
    assert full_context.default_budget_mb("cuda") == 128  # never below the CPU's


def test_block_size_applies_during_the_call_and_is_restored_after_a_failure():
    model = tiny_model("none")
    model.encoder.set_block_size(5)
    seen = []

    def failing_forward(*args, **kwargs):
        seen.append([layer.attn.block_size for layer in model.encoder.layers])
        raise RuntimeError("boom")

    model.encoder.layers[1].forward = failing_forward
    with pytest.raises(RuntimeError, match="boom"):
        encode_full(model, torch.randn(1, 400, 20), torch.tensor([400]), block_size=3)
    assert seen == [[3, 3]]
    assert [layer.attn.block_size for layer in model.encoder.layers] == [5, 5]
