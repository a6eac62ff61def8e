"""ALiBi: slopes follow Press et al.'s geometric series for any H, the encoder bias is
−m_h·|i − j| (symmetric, zero on the diagonal, blind to left/right), the causal form is
−m_h·(i − j) on the past, and every attention path gives the same output."""

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention
from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.alibi import alibi_slopes

D = 48

EXPECTED = {  # written out from the series, not from the code
    1: [2 ** -8],
    4: [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8],
    6: [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3],  # 4 of H=4, then 8-series [0::2]
    8: [2 ** -h for h in range(1, 9)],
    12: [2 ** -h for h in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5],
    16: [2 ** (-h / 2) for h in range(1, 17)],
}


@pytest.mark.parametrize("H", sorted(EXPECTED))
def test_slopes_match_series(H):
    got = alibi_slopes(H)
    assert got.shape == (H,)
    assert torch.allclose(got, torch.tensor(EXPECTED[H]), rtol=1e-6)


def alibi(H=4, **kw):
    return build_positional("alibi", d_model=8 * H, n_heads=H, n_layers=1, **kw).layer(0)


def test_bias_is_symmetric_linear_and_zero_on_diagonal():
    pe = alibi(4)
    pos = torch.arange(30)
    b = pe.logits_bias(torch.zeros(1, 4, 30, 12), pos, pos)[0]  # (H, T, T)
    assert torch.equal(b, b.transpose(-1, -2))
    assert torch.all(b.diagonal(dim1=-2, dim2=-1) == 0)
    i, j = 3, 11
    assert torch.allclose(b[:, i, j], -alibi_slopes(4) * 8)
    # left and right neighbours look the same: the documented blindness
    assert torch.allclose(b[:, 10, 9], b[:, 10, 11])


def test_bias_depends_only_on_offset_and_blocks():
    pe = alibi(6)
    q = torch.zeros(1, 6, 5, 8)
    a = pe.logits_bias(q, torch.arange(5), torch.arange(40))
    b = pe.logits_bias(q, torch.arange(5) + 500, torch.arange(40) + 500)
    assert torch.equal(a, b)


def test_causal_form():
    pe = alibi(4, causal=True)
    pos = torch.arange(10)
    b = pe.logits_bias(torch.zeros(1, 4, 10, 12), pos, pos)[0]
    m = alibi_slopes(4)
    assert torch.allclose(b[:, 7, 2], -m * 5)
    assert torch.all(b.triu(1) == 0)  # future entries are left to the causal mask
    # causal attention with the causal bias equals the symmetric bias under the same mask
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, 4).eval()
    x = torch.randn(2, 10, D)
    with torch.no_grad():
        a, _ = mha(x, pe=pe, causal=True)
        s, _ = mha(x, pe=alibi(4), causal=True)
    assert torch.allclose(a, s, atol=1e-6)


def test_learned_scale_clamped_and_gets_gradients():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="alibi", d_model=D, n_heads=4, n_layers=2, dropout=0.0,
                        learned_scale=True)
    params = list(enc.pe.parameters())
    assert len(params) == 2 and all(p.shape == (4,) for p in params)  # one scale per layer
    out, _ = enc(torch.randn(2, 20, D), torch.tensor([20, 12]))
    out.pow(2).sum().backward()
    for p in params:
        assert p.grad is not None and p.grad.abs().sum() > 0
    pe = enc.pe.layer(0)
    with torch.no_grad():
        pe.scale.copy_(torch.tensor([-1.0, 0.0, 1.0, 2.0]))
    assert torch.allclose(pe.head_slopes(), alibi_slopes(4) * torch.tensor([0.0, 0.0, 1.0, 2.0]))


@pytest.mark.parametrize("bias_mode", ["sdpa", "explicit"])
def test_fast_path_matches_reference(bias_mode):
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="alibi", d_model=D, n_heads=4, n_layers=2, dropout=0.0,
                        bias_mode=bias_mode).eval()
    x, lengths = torch.randn(3, 40, D), torch.tensor([40, 25, 3])
    with torch.no_grad():
        fast, _ = enc(x, lengths)
        for layer in enc.layers:
            layer.attn.use_reference = True
        ref, _ = enc(x, lengths)
    assert torch.allclose(fast, ref, atol=1e-5)


def test_relative_inside_longer_padded_input():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, 4).eval()
    pe = alibi(4)
    T, s = 20, 9
    x = torch.randn(1, T, D)
    long = torch.cat((torch.randn(1, s, D), x, torch.zeros(1, 5, D)), dim=1)
    pad = torch.zeros(1, long.size(1), dtype=torch.bool)
    pad[:, s + T:] = True
    with torch.no_grad():
        _, w_short = mha(x, pe=pe, need_weights=True)
        _, w_long = mha(long, pad, pe=pe, need_weights=True)
    ls, ll = w_short.log(), w_long[..., s:s + T, s:s + T].log()
    assert torch.allclose(ls - ls[..., :1], ll - ll[..., :1], atol=1e-4)


def test_padded_batch_equals_one_by_one():
    torch.manual_seed(0)
    enc = build_encoder("conformer", pe="alibi", d_model=D, n_heads=4, n_layers=2, dropout=0.0).eval()
    x, lengths = torch.randn(2, 30, D), torch.tensor([30, 11])
    with torch.no_grad():
        out, _ = enc(x, lengths)
        alone, _ = enc(x[1:, :11], lengths[1:])
    assert torch.allclose(out[1, :11], alone[0], atol=1e-5)


def test_runs_at_20x_training_length_and_blocked_matches():
    torch.manual_seed(0)
    enc = build_encoder("transformer", pe="alibi", d_model=16, n_heads=2, n_layers=1, dropout=0.0).eval()
    x, lengths = torch.randn(1, 2000, 16), torch.tensor([2000])
    with torch.no_grad():
        full, _ = enc(x, lengths)
        enc.set_block_size(512)
        blocked, _ = enc(x, lengths)
    assert torch.isfinite(full).all()
    assert torch.allclose(full, blocked, atol=1e-5)
