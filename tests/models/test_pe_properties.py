"""Properties every positional encoding must have, checked for every registered PE, ``none``,
combinations and non-default variants, through the real encoders:

* the fused/auto path equals the explicit reference path (fp32, 1e-5, with padding);
* gradients reach every parameter (of the PE and of the encoder);
* a padded batch gives the utterances' one-by-one outputs on valid frames;
* the encoder runs at 20x a training length (T = 2000 vs 100) — the learned table under its
  default ``error`` policy raises a clear error naming the length and the limit instead;
* attention in query blocks (T not a multiple of the block) equals unblocked attention;
* attention-stage PEs (all relative in this study) depend on i − j only: the hooks give the
  same logits / value term / REM mix for positions shifted by s, and content placed at an
  offset inside a longer input (other keys hidden as padding) gets the same attention output.
"""

import math

import pytest
import torch

from asr_pe.models import build_encoder
from asr_pe.models.attention import MultiHeadAttention, make_pad_mask
from asr_pe.models.positional import available_pes, build_positional

PES = available_pes()
D, H, LAYERS = 16, 4, 2
TRAIN_LEN = 100  # the "training length" of the length-generalisation check

COMBOS = [c for c in ("cape+rope", "sinusoidal+relative", "conv+rem", "learned+shaw", "cape+t5")
          if all(n in PES["input"] + PES["attention"] for n in c.split("+"))]
VARIANTS = {  # non-default options that switch paths: value term (explicit path), REM options
    "shaw_value_zero": {"attention": {"name": "shaw", "max_distance": 3, "beyond": "zero", "value_term": True}},
    "rem_row_headgate": {"attention": {"name": "rem", "heads": ["regular:2", "cyclic_sin", "plain", "cyclic_cos"],
                                       "normalize": "row", "gate": "head"}},
}
SPECS = ["none", *PES["input"], *PES["attention"], *COMBOS, *VARIANTS]


def spec_of(name):
    return VARIANTS.get(name, name)


def as_mapping(spec):
    """A name/combination as the {input, attention} mapping, so options can be set per stage."""
    if isinstance(spec, dict):
        return {k: dict(v) for k, v in spec.items()}
    out = {}
    for n in spec.split("+"):
        if n != "none":
            out["input" if n in PES["input"] else "attention"] = {"name": n}
    return out


def make_encoder(name, kind="transformer", seed=0, **kw):
    torch.manual_seed(seed)
    enc = build_encoder(kind, spec_of(name), d_model=D, n_heads=H, n_layers=LAYERS, dropout=0.0,
                        conv_kernel=5, **kw)
    return enc.eval()


def set_reference(enc, flag):
    for m in enc.modules():
        if isinstance(m, MultiHeadAttention):
            m.use_reference = flag


def batch(T=21, lengths=(21, 15, 6), seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(lengths), T, D, generator=g), torch.tensor(lengths)


@pytest.mark.parametrize(
    "kind,bias_mode",
    # bias_mode="sdpa" sends additive biases through SDPA as a float mask (the default on
    # accelerators); the attention path does not depend on the block kind, so once suffices
    [("transformer", "auto"), ("transformer", "sdpa"), ("conformer", "auto")],
)
@pytest.mark.parametrize("name", SPECS)
def test_fused_equals_reference(name, kind, bias_mode):
    enc = make_encoder(name, kind, bias_mode=bias_mode)
    x, lengths = batch()
    with torch.no_grad():
        fast, _ = enc(x, lengths)
        set_reference(enc, True)
        ref, _ = enc(x, lengths)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", SPECS)
def test_gradients_reach_every_parameter(name):
    enc = make_encoder(name, "conformer" if "+" in name else "transformer").train()  # train mode: CAPE's augmentation is on the graph
    x, lengths = batch()
    out, _ = enc(x, lengths)
    # a fixed random projection: a plain sum of a LayerNorm output has zero gradient
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(2))).sum().backward()
    pe_params = dict(enc.pe.named_parameters())
    for pname, p in enc.named_parameters():
        assert p.grad is not None, f"{name}: no gradient for {pname}"
        assert torch.isfinite(p.grad).all(), f"{name}: non-finite gradient for {pname}"
        where = "PE parameter" if pname.removeprefix("pe.") in pe_params else "parameter"
        assert p.grad.abs().sum() > 0, f"{name}: zero gradient for {where} {pname}"


@pytest.mark.parametrize("kind", ["transformer", "conformer"])
@pytest.mark.parametrize("name", SPECS)
def test_padded_batch_equals_one_by_one(name, kind):
    enc = make_encoder(name, kind)
    x, lengths = batch()
    with torch.no_grad():
        out, out_len = enc(x, lengths)
        assert torch.equal(out_len, lengths)
        for b, L in enumerate(lengths.tolist()):
            alone, _ = enc(x[b:b + 1, :L], lengths[b:b + 1])
            torch.testing.assert_close(out[b, :L], alone[0], atol=1e-5, rtol=1e-5)
            assert (out[b, L:] == 0).all()


def _long_input(T=20 * TRAIN_LEN):
    return torch.randn(1, T, D, generator=torch.Generator().manual_seed(3)), torch.tensor([T])


@pytest.mark.parametrize("name", SPECS)
def test_runs_at_20x_training_length(name):
    """One layer (depth does not change what a length limit would break), in query blocks of
    512 rows: long inputs are run that way, so blocks at large offsets are exercised too."""
    spec = as_mapping(spec_of(name))
    opts = dict(d_model=D, n_heads=H, n_layers=1, block_size=512)
    x, lengths = _long_input()
    if spec.get("input", {}).get("name") == "learned":
        spec["input"]["max_len"] = TRAIN_LEN
        torch.manual_seed(0)
        enc = build_encoder("transformer", spec, **opts).eval()
        with pytest.raises(ValueError, match=rf"(?s)(2000.*{TRAIN_LEN}|{TRAIN_LEN}.*2000)"):
            enc(x, lengths)
        runs = [dict(spec, input=dict(spec["input"], policy=p)) for p in ("wrap", "clamp")]
    else:
        runs = [spec]
    for s in runs:
        torch.manual_seed(0)
        enc = build_encoder("transformer", s, **opts).eval()
        with torch.no_grad():
            out, _ = enc(x, lengths)
        assert out.shape == (1, 2000, D) and torch.isfinite(out).all(), s


@pytest.mark.parametrize("kind", ["transformer", "conformer"])
@pytest.mark.parametrize("name", SPECS)
def test_blocked_attention_equals_unblocked(name, kind):
    enc = make_encoder(name, kind)
    x, lengths = batch(T=23, lengths=(23, 17, 4))
    with torch.no_grad():
        full, _ = enc(x, lengths)
        for block in (4, 7, 10, 22):
            enc.set_block_size(block)
            blocked, _ = enc(x, lengths)
            torch.testing.assert_close(blocked, full, atol=1e-5, rtol=1e-5,
                                       msg=lambda m: f"block {block}: {m}")
        enc.set_block_size(None)


# --- relative families: everything depends on i − j only ------------------------------------

def hook_outputs(pe, q, k, v, weights, out, q_pos, k_pos, pad):
    """Every position-dependent quantity the hooks produce for these positions."""
    q2, k2 = pe.transform_qk(q, k, q_pos, k_pos)
    logits = q2 @ k2.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    bias = pe.logits_bias(q, q_pos, k_pos)
    if bias is not None:
        logits = logits + bias
    res = {"logits": logits, "mix_output": pe.mix_output(out, v, q_pos, k_pos, pad),
           "mix_weights": pe.mix_weights(weights, q_pos, k_pos, pad)}
    extra = pe.value_term(weights, q_pos, k_pos)
    if extra is not None:
        res["value_term"] = extra
    return res


ATTENTION = [*PES["attention"], "shaw_value_zero", "rem_row_headgate"]


def attention_layer(name, causal=False):
    spec = as_mapping(spec_of(name))
    torch.manual_seed(0)
    return build_positional(spec, d_model=D, n_heads=H, n_layers=1, causal=causal).layer(0).eval()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ATTENTION)
def test_hooks_depend_only_on_offset(name, causal):
    pe = attention_layer(name, causal)
    g = torch.Generator().manual_seed(4)
    B, Tq, Tk, d = 2, 5, 9, D // H
    q, k = torch.randn(B, H, Tq, d, generator=g), torch.randn(B, H, Tk, d, generator=g)
    v, out = torch.randn(B, H, Tk, d, generator=g), torch.randn(B, H, Tq, d, generator=g)
    weights = torch.softmax(torch.randn(B, H, Tq, Tk, generator=g), -1)
    pad = make_pad_mask(torch.tensor([9, 6]), Tk)
    q_pos, k_pos = torch.arange(2, 2 + Tq), torch.arange(Tk)  # a query block inside the keys
    base = hook_outputs(pe, q, k, v, weights, out, q_pos, k_pos, pad)
    for s in (1, 37, 300):
        shifted = hook_outputs(pe, q, k, v, weights, out, q_pos + s, k_pos + s, pad)
        for key in base:
            torch.testing.assert_close(shifted[key], base[key], atol=1e-4, rtol=1e-4,
                                       msg=lambda m: f"{key} changes under a shift by {s}: {m}")
    # and the PE does see positions: something differs from plain attention
    plain = q @ k.transpose(-2, -1) / math.sqrt(d)
    assert not (torch.allclose(base["logits"], plain, atol=1e-4) and torch.allclose(base["mix_output"], out)
                and "value_term" not in base), f"{name} leaves attention unchanged"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ATTENTION)
def test_content_at_an_offset_gets_the_same_attention_output(name, causal):
    """The same T frames placed at offset s of a longer input whose other frames are hidden as
    padded keys: each query row of the content gets the same output as in the short input."""
    pe = attention_layer(name, causal)
    torch.manual_seed(5)
    mha = MultiHeadAttention(D, H).eval()
    T, s, T_long = 8, 19, 40
    x = torch.randn(1, T, D)
    x_long = torch.randn(1, T_long, D)
    x_long[:, s:s + T] = x
    hidden = torch.ones(1, T_long, dtype=torch.bool)
    hidden[:, s:s + T] = False
    with torch.no_grad():
        for use_reference in (False, True):
            mha.use_reference = use_reference
            short, _ = mha(x, None, pe=pe, causal=causal)
            long, _ = mha(x_long, hidden, pe=pe, causal=causal)
            torch.testing.assert_close(long[:, s:s + T], short, atol=1e-5, rtol=1e-5)
