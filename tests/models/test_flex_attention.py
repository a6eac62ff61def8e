"""The FlexAttention path (``asr_pe/models/attention_flex.py``) computes the reference path's
function: each layout's ``score_mod`` adds exactly the PE's ``logits_bias``, and one attention layer
through flex (``bias_mode="flex"``) equals the written-out reference on every real query row, with
padding, causality and the window remedy as block masks (CPU: torch's eager flex, forward only —
torch has no CPU backward for it; the backward is checked on CUDA here when there is one, and by the
GPU check's ``flex`` step, ``asr_pe/bench/flex_check.py``). Also: when the path is taken."""

import pytest
import torch

from asr_pe.models import attention_flex as flex
from asr_pe.models import build_encoder
from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional import build_positional

D, H = 16, 4
PES = {
    "t5": "t5",
    "t5_causal": {"attention": {"name": "t5", "causal": True}},
    "alibi": "alibi",
    "alibi_learned": {"attention": {"name": "alibi", "learned_scale": True}},
    "shaw": "shaw",
    "shaw_k3_clip": {"attention": {"name": "shaw", "max_distance": 3}},
    "shaw_k3_zero": {"attention": {"name": "shaw", "max_distance": 3, "beyond": "zero"}},
    "relative": "relative",
}


def hook(spec, causal=False):
    torch.manual_seed(0)
    pe = build_positional(spec, d_model=D, n_heads=H, n_layers=1, causal=causal).layer(0)
    with torch.no_grad():  # parameters away from their initial values
        for p in pe.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return pe


def take_flex(monkeypatch):
    calls = []
    real = flex.attend_flex

    def spy(*a, **kw):
        calls.append(type(a[3]).__name__)
        return real(*a, **kw)

    monkeypatch.setattr(flex, "attend_flex", spy)
    return calls


@pytest.mark.parametrize("name", list(PES))
def test_score_mod_adds_the_pes_bias(name):
    """score_mod evaluated on every (b, h, i, j) = logits_bias (the 0 score in, the bias out)."""
    pe = hook(PES[name], causal=name.endswith("causal"))
    B, T = 2, 19
    q = torch.randn(B, H, T, D // H)
    pos = torch.arange(T)
    layout = pe.block_bias(q, pos, pos)
    mod = layout.score_mod()
    b, h, i, j = torch.meshgrid(torch.arange(B), torch.arange(H), pos, pos, indexing="ij")
    got = mod(torch.zeros(B, H, T, T), b, h, i, j)  # (B, H, T, T)
    want = pe.logits_bias(q, pos, pos).expand(B, H, T, T)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("window", [None, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", list(PES))
def test_layer_through_flex_equals_reference(name, causal, window, monkeypatch):
    lengths = [23, 17, 5]  # padded: the block mask hides keys 17… and 5… of the last two
    calls = take_flex(monkeypatch)
    pe = hook(PES[name], causal)
    torch.manual_seed(1)
    mha = MultiHeadAttention(D, H, bias_mode="flex").eval()
    mha.window = window
    x = torch.randn(3, 23, D)
    pad = make_pad_mask(torch.tensor(lengths), 23)
    with torch.no_grad():
        out, _ = mha(x, pad, pe=pe, causal=causal)
        assert len(calls) == 1, "the flex path was not taken"
        mha.use_reference = True
        ref, _ = mha(x, pad, pe=pe, causal=causal)
    for b, n in enumerate(lengths):  # padded query rows are not compared: flex gives 0 to a row with no key
        torch.testing.assert_close(out[b, :n], ref[b, :n], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["t5", "relative"])
def test_encoder_through_flex_equals_reference(name):
    torch.manual_seed(0)
    enc = build_encoder("conformer", PES[name], d_model=D, n_heads=H, n_layers=2, ffn_dim=32, conv_kernel=5,
                        dropout=0.0, bias_mode="flex").eval()
    x, lengths = torch.randn(3, 37, D), torch.tensor([37, 30, 11])
    outs = []
    with torch.no_grad():
        for reference in (False, True):
            for m in enc.modules():
                if isinstance(m, MultiHeadAttention):
                    m.use_reference = reference
            out, _ = enc(x, lengths)
            outs.append(out)
    for b, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(outs[0][b, :n], outs[1][b, :n], atol=1e-5, rtol=1e-5)


def test_when_the_flex_path_applies():
    with torch.no_grad():
        assert flex.may_use_flex("flex", "cpu", 0.0)
    assert not flex.may_use_flex("flex", "cpu", 0.0)  # gradients wanted: torch has no CPU flex backward
    assert not flex.may_use_flex("auto", "cpu", 0.0)  # CPU: the blocked/SDPA paths (no flex backward)
    assert flex.may_use_flex("auto", "cuda", 0.0)
    assert not flex.may_use_flex("auto", "cuda", 0.1)  # flex has no attention dropout
    assert not flex.may_use_flex("sdpa", "cuda", 0.0) and not flex.may_use_flex("explicit", "cuda", 0.0)
    q, pos = torch.randn(1, H, 5, D // H), torch.arange(5)
    t5 = hook("t5").block_bias(q, pos, pos)
    assert flex.use_flex("flex", "cpu", 0.0, t5)
    assert not flex.use_flex("flex", "cpu", 0.0, None)  # a PE with no compact bias (RoPE, REM, none)
    assert not flex.use_flex("auto", "cuda", 0.0, t5, n_keys=2999)  # measured slower up to there
    assert flex.use_flex("auto", "cuda", 0.0, t5, n_keys=3000)
    alibi = hook("alibi").block_bias(q, pos, pos)  # fixed slopes: from 4000 keys
    assert not flex.use_flex("auto", "cuda", 0.0, alibi, n_keys=3999) and flex.use_flex("auto", "cuda", 0.0, alibi, n_keys=4000)
    rel = hook("relative").block_bias(q, pos, pos)  # never: slower and larger at every length
    assert not flex.use_flex("auto", "cuda", 0.0, rel, n_keys=10**6) and flex.use_flex("flex", "cuda", 0.0, rel)
    assert not flex.use_flex("flex", "cuda", 0.0, t5, head_size=8)  # the compiled kernel needs >= 16


def test_rope_and_blocked_long_inputs_keep_their_paths(monkeypatch):
    calls = take_flex(monkeypatch)
    x = torch.randn(2, 40, D)
    with torch.no_grad():
        MultiHeadAttention(D, H, bias_mode="flex")(x, pe=hook("rope"))
        MultiHeadAttention(D, H, bias_mode="flex", block_size=16)(x, pe=hook("t5"))  # blocked inference
        mha = MultiHeadAttention(D, H, bias_mode="flex")
        mha.logit_scale_keys = 10  # a length temperature: not in the score_mod
        mha(x, pe=hook("t5"))
    assert calls == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlexAttention's backward runs on CUDA only")
@pytest.mark.parametrize("name", ["t5", "shaw", "relative", "alibi_learned"])
def test_flex_gradients_on_cuda_equal_reference(name):
    d_model = 64  # heads of 16: the compiled kernel's least
    torch.manual_seed(0)
    pe = build_positional(PES[name], d_model=d_model, n_heads=H, n_layers=1).layer(0).cuda()
    with torch.no_grad():
        for p in pe.parameters():
            p.add_(0.1 * torch.randn_like(p))
    torch.manual_seed(1)
    mha = MultiHeadAttention(d_model, H, bias_mode="flex").cuda()
    x = torch.randn(3, 200, d_model, device="cuda", requires_grad=True)
    lengths = [200, 150, 64]
    pad = make_pad_mask(torch.tensor(lengths, device="cuda"), 200)
    out, _ = mha(x, pad, pe=pe)
    mha.use_reference = True
    ref, _ = mha(x, pad, pe=pe)
    keep = ~pad[:, :, None]
    w = torch.randn_like(ref) * keep
    params = [x] + list(pe.parameters()) + list(mha.parameters())
    for a, b in zip(torch.autograd.grad((out * w).sum(), params), torch.autograd.grad((ref * w).sum(), params)):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
