"""The mathematics of the inference remedies for long inputs (asr_pe/inference/remedies.py):
a window hides exactly the keys beyond W in every attention path, logit scaling is 1 up to the
training length and scales the whole logit beyond it, and the RoPE rescalings (PI, NTK, YaRN)
map positions / frequencies as their papers define while keeping scores a function of i − j."""

from __future__ import annotations

import math

import pytest
import torch

from asr_pe.models.attention import MultiHeadAttention, hidden_keys, make_pad_mask
from asr_pe.models.encoder import build_encoder
from asr_pe.models.positional import build_positional
from asr_pe.models.positional.rope import RoPE, RopeScaling

D, H, T = 32, 4, 40
ATTENTION_PES = ["none", "rope", "t5", "alibi", "relative", "shaw", "rem"]


def _layer(name: str, seed: int = 0):
    torch.manual_seed(seed)
    hook = build_positional(name, d_model=D, n_heads=H, n_layers=1).layer(0)
    return MultiHeadAttention(D, H).eval(), hook


def _paths(att, x, kpm, hook):
    """The output of every attention path: reference, auto (fused), explicit, blocked."""
    outs = {}
    with torch.no_grad():
        att.use_reference = True
        outs["reference"] = att(x, kpm, pe=hook)[0]
        att.use_reference = False
        outs["auto"] = att(x, kpm, pe=hook)[0]
        att.bias_mode = "explicit"
        outs["explicit"] = att(x, kpm, pe=hook)[0]
        att.bias_mode = "auto"
        att.block_size = 7
        outs["blocked"] = att(x, kpm, pe=hook)[0]
        att.block_size = None
    return outs


def _set_window(att, hook, frames):
    att.window = frames
    if hook is not None:
        hook.window = frames


def test_hidden_keys_is_the_band_and_the_causal_mask():
    q, k = torch.arange(3, 9), torch.arange(12)
    far = hidden_keys(q, k, causal=False, window=2)
    assert torch.equal(far, (q[:, None] - k[None, :]).abs() > 2)
    both = hidden_keys(q, k, causal=True, window=2)
    assert torch.equal(both, far | (k[None, :] > q[:, None]))
    assert hidden_keys(q, k, causal=False, window=None) is None


@pytest.mark.parametrize("name", ATTENTION_PES)
def test_window_hides_exactly_the_keys_beyond_w(name):
    att, hook = _layer(name)
    W = 5
    _set_window(att, hook, W)
    torch.manual_seed(1)
    x = torch.randn(2, T, D)
    kpm = make_pad_mask(torch.tensor([T, 30]), T)
    with torch.no_grad():
        _, weights = att(x, kpm, pe=hook, need_weights=True)  # (B, H, T, T)
        i = torch.arange(T)
        far = (i[:, None] - i[None, :]).abs() > W
        assert weights[0][:, far].abs().max() == 0, "a key beyond the window got weight"
        assert weights[1][:, :30][:, far[:30]].abs().max() == 0
        assert weights[0][:, ~far].abs().max() > 0
        # perturbing frame 20 changes exactly the rows that see it: |i − 20| <= W
        base = att(x, kpm, pe=hook)[0]
        x2 = x.clone()
        x2[:, 20] += 1.0
        changed = (att(x2, kpm, pe=hook)[0] - base).abs().amax(-1)[0] > 1e-6
    assert changed.nonzero().flatten().tolist() == list(range(20 - W, 20 + W + 1))


@pytest.mark.parametrize("name", ATTENTION_PES)
def test_window_same_in_every_path(name):
    att, hook = _layer(name)
    _set_window(att, hook, 5)
    torch.manual_seed(2)
    x = torch.randn(2, T, D)
    kpm = make_pad_mask(torch.tensor([T, 30]), T)
    outs = _paths(att, x, kpm, hook)
    for path, out in outs.items():
        torch.testing.assert_close(out[0], outs["reference"][0], atol=2e-6, rtol=1e-5, msg=path)
        torch.testing.assert_close(out[1, :30], outs["reference"][1, :30], atol=2e-6, rtol=1e-5, msg=path)


@pytest.mark.parametrize("name", ATTENTION_PES)
def test_window_wider_than_the_input_changes_nothing(name):
    att, hook = _layer(name)
    torch.manual_seed(3)
    x = torch.randn(1, T, D)
    with torch.no_grad():
        plain = att(x, None, pe=hook)[0]
        _set_window(att, hook, T - 1)
        windowed = att(x, None, pe=hook)[0]
    torch.testing.assert_close(windowed, plain, atol=2e-6, rtol=1e-5)


def _manual_scaled_output(att, hook, x, s):
    """softmax(s·(QKᵀ/√d + bias))·V (+ the PE's value term / mixing) written out for one utterance."""
    B, Tq, _ = x.shape
    q, k, v = att.in_proj(x).split(D, dim=-1)
    q, k, v = att.split_heads(q), att.split_heads(k), att.split_heads(v)
    pos = torch.arange(Tq)
    q_raw = q
    if hook is not None:
        q, k = hook.transform_qk(q, k, pos, pos)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
    if hook is not None and hook.logits_bias(q_raw, pos, pos) is not None:
        scores = scores + hook.logits_bias(q_raw, pos, pos)
    p = torch.softmax(s * scores, dim=-1)
    out = p @ v
    if hook is not None:
        extra = hook.value_term(p, pos, pos)
        if extra is not None:
            out = out + extra
        out = hook.mix_output(out, v, pos, pos, None)
    return att.out_proj(out.transpose(1, 2).reshape(B, Tq, D))


@pytest.mark.parametrize("name", ATTENTION_PES)
def test_logit_scaling_is_one_up_to_the_training_length_and_scales_every_logit_beyond(name):
    att, hook = _layer(name)
    torch.manual_seed(4)
    x = torch.randn(1, T, D)
    with torch.no_grad():
        plain = att(x, None, pe=hook)[0]
        att.logit_scale_keys = T  # trained on inputs as long as this one: factor 1
        torch.testing.assert_close(att(x, None, pe=hook)[0], plain)
        att.logit_scale_keys = 2 * T
        torch.testing.assert_close(att(x, None, pe=hook)[0], plain)
        att.logit_scale_keys = 10
        s = math.log(T) / math.log(10)
        expected = _manual_scaled_output(att, hook, x, s)
        for path, out in _paths(att, x, None, hook).items():
            torch.testing.assert_close(out, expected, atol=2e-6, rtol=1e-5, msg=path)
        torch.testing.assert_close(att(x, None, pe=hook)[0], expected, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["none", "alibi", "t5", "relative"])
def test_logit_scaling_uses_each_utterances_own_length(name):
    """A padded utterance gets the factor of its own length, as if decoded alone."""
    att, hook = _layer(name)
    att.logit_scale_keys = 8
    torch.manual_seed(5)
    x = torch.randn(2, T, D)
    kpm = make_pad_mask(torch.tensor([T, 25]), T)
    with torch.no_grad():
        batch = att(x, kpm, pe=hook)[0]
        alone = att(x[1:, :25], None, pe=hook)[0]
    torch.testing.assert_close(batch[1, :25], alone[0], atol=2e-6, rtol=1e-5)


def test_encoder_setters_reach_every_layer_and_refuse_bad_values():
    enc = build_encoder("transformer", pe="rem", d_model=D, n_heads=H, n_layers=2)
    enc.set_attention_window(7)
    assert all(layer.attn.window == 7 for layer in enc.layers)
    assert all(enc.pe.layer(i).window == 7 for i in range(2))
    enc.set_attention_window(None)
    assert all(layer.attn.window is None for layer in enc.layers)
    enc.set_logit_scaling(125)
    assert all(layer.attn.logit_scale_keys == 125 for layer in enc.layers)
    with pytest.raises(ValueError, match="window"):
        enc.set_attention_window(-1)
    with pytest.raises(ValueError, match="training length"):
        enc.set_logit_scaling(1)


# --- RoPE rescalings ---------------------------------------------------------------------
def _rope(kind=None, train=100, **kw):
    pe = RoPE(d_model=D, n_heads=H, **kw)
    if kind is not None:
        pe.scaling = RopeScaling(kind, train)
    return pe


@pytest.mark.parametrize("kind", ["pi", "ntk", "yarn"])
def test_rope_scaling_leaves_inputs_up_to_the_training_length_alone(kind):
    pe = _rope(kind, train=100)
    freq, pos_factor, logit_factor = pe.scaled_frequencies(100)
    assert torch.equal(freq, pe.inv_freq) and pos_factor == 1.0 and logit_factor == 1.0


def test_rope_pi_maps_the_longest_position_into_the_training_range():
    pe = _rope("pi", train=100)
    L = 4000
    _, factor, _ = pe.scaled_frequencies(L)
    assert factor == pytest.approx(100 / L)
    top = pe.angles(torch.tensor([L - 1]), pos_factor=factor)
    plain_at_train = pe.angles(torch.tensor([100]))
    assert bool((top < plain_at_train).all()), "position L − 1 must map below the training length"


def test_rope_ntk_keeps_the_highest_frequency_and_interpolates_the_lowest():
    pe = _rope("ntk", train=100)
    s = 40.0
    freq, factor, logit = pe.scaled_frequencies(int(100 * s))
    assert factor == 1.0 and logit == 1.0
    torch.testing.assert_close(freq[0], pe.inv_freq[0])  # θ_0 = 1
    torch.testing.assert_close(freq[-1], pe.inv_freq[-1] / s, rtol=1e-5, atol=0)
    assert bool((freq <= pe.inv_freq + 1e-12).all())


def test_rope_yarn_interpolates_by_parts_with_its_temperature():
    # 1000 training frames: θ_0 turns 159 times, beyond β = 32 (with the study's 125 frames no
    # frequency turns 32 times, and YaRN's defaults interpolate every one of them a little)
    pe = _rope("yarn", train=1000)
    s = 40.0
    freq, factor, logit = pe.scaled_frequencies(int(1000 * s))
    assert factor == 1.0
    assert logit == pytest.approx((0.1 * math.log(s) + 1) ** 2)
    periods = 1000 * pe.inv_freq / (2 * math.pi)  # r_k: periods within the training length
    kept, interpolated = periods > 32, periods < 1
    assert kept.any() and interpolated.any(), "the test needs frequencies on both sides of the ramp"
    torch.testing.assert_close(freq[kept], pe.inv_freq[kept])
    torch.testing.assert_close(freq[interpolated], pe.inv_freq[interpolated] / s)
    ramp = ~(kept | interpolated)
    assert bool(((freq[ramp] < pe.inv_freq[ramp]) & (freq[ramp] > pe.inv_freq[ramp] / s)).all())


@pytest.mark.parametrize("kind", ["pi", "ntk", "yarn"])
def test_rope_rescaled_scores_still_depend_on_i_minus_j_only(kind):
    pe = _rope(kind, train=10)
    torch.manual_seed(6)
    q1, k1 = torch.randn(1, H, 1, D // H), torch.randn(1, H, 1, D // H)
    L = 50
    q = q1.expand(1, H, L, D // H)
    k = k1.expand(1, H, L, D // H)
    pos = torch.arange(L)
    qr, kr = pe.transform_qk(q, k, pos, pos)
    scores = (qr @ kr.transpose(-2, -1))[0]  # (H, L, L)
    for shift in (1, 7):
        torch.testing.assert_close(scores[:, shift:, shift:], scores[:, :-shift, :-shift], atol=1e-4, rtol=1e-4)


def test_rope_scaling_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="rope scaling"):
        RopeScaling("linear", 100)
