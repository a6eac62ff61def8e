"""Transformer decoder: causality for every decoder PE, padding, cache == recomputation.

A decoder is causal when the logits at step t are a function of tokens 0..t only: changing
tokens after t must leave rows 0..t unchanged (and changing token t must change row t, or
the check would pass for a model that ignores its input). Teacher forcing, the recomputing
step function and the key/value-cached step function must give the same numbers.
"""

import math
from pathlib import Path

import pytest
import torch
import yaml

from asr_pe.models.asr import build_asr_model
from asr_pe.models.decoder import build_decoder
from asr_pe.models.positional import available_pes
from asr_pe.models.positional.sinusoidal import sinusoid

CONF = Path(__file__).resolve().parents[2] / "conf"
_REGISTERED = set(available_pes()["input"]) | set(available_pes()["attention"])
DECODER_PES = ["none", "sinusoidal"] + [
    p for p in ("learned", "rope", "alibi", "t5", "rem", "relative", "shaw") if p in _REGISTERED
] + (["learned+t5"] if {"learned", "t5"} <= _REGISTERED else [])
V, D, H = 13, 32, 4


def make_decoder(pe, seed=0, n_layers=2):
    torch.manual_seed(seed)
    dec = build_decoder(V, D, n_layers=n_layers, n_heads=H, ffn_dim=48, dropout=0.0, pe=pe).eval()
    with torch.no_grad():  # PE parameters start at zero for some families (T5, relative u/v): make them act
        for p in dec.pe.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return dec


def enc_batch(B=2, T=10, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, D, generator=g), torch.full((B,), T, dtype=torch.long)


@pytest.mark.parametrize("pe", DECODER_PES)
def test_decoder_is_causal(pe):
    dec = make_decoder(pe)
    enc, enc_len = enc_batch()
    g = torch.Generator().manual_seed(2)
    U = 9
    tokens = torch.randint(0, V, (2, U), generator=g)
    lengths = torch.full((2,), U)
    with torch.no_grad():
        base = dec(tokens, lengths, enc, enc_len)  # (B, U, V)
        for t in range(U - 1):
            changed = tokens.clone()
            changed[:, t + 1 :] = (tokens[:, t + 1 :] + 1 + torch.randint(0, V - 1, (2, U - t - 1), generator=g)) % V
            out = dec(changed, lengths, enc, enc_len)
            torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=1e-5, rtol=1e-5)
            assert (out[:, t + 1] - base[:, t + 1]).abs().max() > 1e-4, "row t+1 ignores token t+1"


@pytest.mark.parametrize("pe", ["alibi", "t5", "rem"])
def test_decoder_uses_causal_pe_forms(pe):
    if pe not in _REGISTERED:
        pytest.skip(f"{pe} not registered")
    dec = make_decoder(pe)
    assert all(dec.pe.layer(i).causal for i in range(len(dec.layers)))


@pytest.mark.parametrize("pe", DECODER_PES)
def test_cached_step_equals_teacher_forcing(pe):
    """forward_step with its key/value cache and step_log_probs (full recomputation) give the
    log-softmax of the teacher-forced logits at every prefix length."""
    dec = make_decoder(pe)
    enc, enc_len = enc_batch(B=1, T=11)
    tokens = torch.randint(0, V, (3, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = dec(tokens, torch.full((3,), 7), enc.expand(3, -1, -1), enc_len.expand(3))
        full = torch.log_softmax(full, dim=-1)  # (N, U, V)
        memory = dec.precompute_memory(enc)  # one utterance shared by 3 hypotheses
        cache = None
        for t in range(1, 8):
            step, cache = dec.forward_step(tokens[:, :t], memory, cache)
            torch.testing.assert_close(step, full[:, t - 1], atol=2e-5, rtol=1e-5)
            ref = dec.step_log_probs(tokens[:, :t], enc.expand(3, -1, -1), enc_len.expand(3))
            torch.testing.assert_close(ref, full[:, t - 1], atol=2e-5, rtol=1e-5)
        # a cache of the wrong length is rebuilt, not misused
        again, _ = dec.forward_step(tokens, memory, None)
        torch.testing.assert_close(again, full[:, -1], atol=2e-5, rtol=1e-5)


def test_cache_follows_reordered_hypotheses():
    """Beam search reorders the cache along dim 0; the next step must match recomputation."""
    dec = make_decoder("rope")
    enc, enc_len = enc_batch(B=1)
    tokens = torch.randint(0, V, (3, 4), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        memory = dec.precompute_memory(enc)
        _, cache = dec.forward_step(tokens, memory, None)
        order = torch.tensor([2, 0, 0])
        cache = [(k.index_select(0, order), v.index_select(0, order)) for k, v in cache]
        nxt = torch.cat([tokens[order], torch.tensor([[1], [2], [3]])], dim=1)
        step, _ = dec.forward_step(nxt, memory, cache)
        ref = dec.step_log_probs(nxt, enc.expand(3, -1, -1), enc_len.expand(3))
    torch.testing.assert_close(step, ref, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("pe", ["sinusoidal", "rem"])
def test_padded_batch_equals_one_by_one(pe):
    """Padded tokens (even -1 ids) and padded encoder frames change no valid output row."""
    dec = make_decoder(pe)
    T = [12, 7, 9]
    U = [5, 8, 3]
    g = torch.Generator().manual_seed(5)
    encs = [torch.randn(t, D, generator=g) for t in T]
    toks = [torch.randint(0, V, (u,), generator=g) for u in U]
    enc = torch.full((3, max(T), D), 7.0)  # garbage in padded frames
    tokens = torch.full((3, max(U)), -1, dtype=torch.long)
    for b in range(3):
        enc[b, : T[b]] = encs[b]
        tokens[b, : U[b]] = toks[b]
    with torch.no_grad():
        batch = dec(tokens, torch.tensor(U), enc, torch.tensor(T))
        for b in range(3):
            one = dec(toks[b][None], torch.tensor([U[b]]), encs[b][None], torch.tensor([T[b]]))
            torch.testing.assert_close(batch[b, : U[b]], one[0], atol=1e-5, rtol=1e-5)
        # a padded memory in the cached path masks the same frames
        memory = dec.precompute_memory(enc, torch.tensor(T))
        u = min(U)
        step, _ = dec.forward_step(tokens[:, :u], memory, None)
        torch.testing.assert_close(step, torch.log_softmax(batch[:, u - 1], -1), atol=2e-5, rtol=1e-5)


def test_encoder_padding_is_masked_in_cross_attention():
    dec = make_decoder("sinusoidal")
    enc, _ = enc_batch(B=1, T=10)
    tokens = torch.randint(0, V, (1, 6), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        a = dec(tokens, torch.tensor([6]), enc, torch.tensor([6]))
        enc2 = enc.clone()
        enc2[:, 6:] = 100.0
        b = dec(tokens, torch.tensor([6]), enc2, torch.tensor([6]))
        c = dec(tokens, torch.tensor([6]), enc2, torch.tensor([10]))
    torch.testing.assert_close(a, b)
    assert (a - c).abs().max() > 1e-3, "valid frames must reach the decoder"


def test_embedding_scale_and_output_shape():
    dec = build_decoder(V, D, n_layers=1, n_heads=H, pe="none")
    assert dec.embed_scale == pytest.approx(math.sqrt(D))
    # init N(0, 1/D) scaled by sqrt(D): unit-variance entries, the scale of the sinusoid
    assert (dec.embed.weight * dec.embed_scale).std().item() == pytest.approx(1.0, rel=0.25)
    enc, enc_len = enc_batch()
    assert dec(torch.zeros(2, 4, dtype=torch.long), torch.tensor([4, 2]), enc, enc_len).shape == (2, 4, V)


@pytest.mark.parametrize("pe", ["conv", "cape"])
def test_non_causal_pe_is_rejected(pe):
    if pe not in _REGISTERED:
        pytest.skip(f"{pe} not registered")
    with pytest.raises(ValueError, match="not causal"):
        build_decoder(V, D, n_layers=1, n_heads=H, pe=pe)


def test_bad_inputs_give_clear_errors():
    dec = make_decoder("none")
    enc, enc_len = enc_batch()
    with pytest.raises(ValueError, match="token ids must lie"):
        dec(torch.full((2, 3), V), torch.tensor([3, 3]), enc, enc_len)
    with pytest.raises(ValueError, match="encoder output must be"):
        dec(torch.zeros(2, 3, dtype=torch.long), torch.tensor([3, 3]), enc[..., :5], enc_len)
    with pytest.raises(ValueError, match="only 'transformer'"):
        build_decoder(V, D, kind="lstm")


def test_decoder_trains_on_a_copy_task():
    """Teacher forcing learns to read the transcript off the encoder 'frames'.

    A decoder that ignores the encoder can at best predict eos at the last step and a uniform
    label elsewhere: mean loss (6/7)·ln(11) ≈ 2.06. Going well below it needs cross-attention.
    """
    torch.manual_seed(0)
    dec = build_decoder(V, D, n_layers=1, n_heads=H, ffn_dim=64, dropout=0.0, pe="sinusoidal")
    proj = torch.nn.Embedding(V, D)
    opt = torch.optim.Adam(list(dec.parameters()) + list(proj.parameters()), lr=1e-2)
    g = torch.Generator().manual_seed(7)
    positions = sinusoid(torch.arange(6), D)  # (T, D): frame positions, so frame i can be found
    losses = []
    for _ in range(40):
        y = torch.randint(1, V - 1, (16, 6), generator=g)  # labels 1..11
        enc = proj(y) + positions  # (B, T, D): the "audio" spells the transcript
        dec_in = torch.cat([torch.full((16, 1), V - 1), y], dim=1)  # [sos, y]
        target = torch.cat([y, torch.full((16, 1), V - 1)], dim=1)  # [y, eos]
        logits = dec(dec_in, torch.full((16,), 7), enc, torch.full((16,), 6))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), target.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    blind = 6 / 7 * math.log(V - 2)
    assert sum(losses[:5]) / 5 > blind
    assert sum(losses[-5:]) / 5 < 0.8 * blind


def test_build_asr_model_with_the_decoder_config():
    """conf/decoder/transformer.yaml builds through build_asr_model (the run config path)."""
    decoder_cfg = yaml.safe_load((CONF / "decoder" / "transformer.yaml").read_text())
    model = build_asr_model(
        vocab_size=V,
        in_features=20,
        frontend={"kind": "conv2d", "factor": 4, "channels": 8},
        encoder={"kind": "transformer", "d_model": D, "n_heads": H, "n_layers": 1, "ffn_dim": 32},
        pe="sinusoidal",
        decoder={**decoder_cfg, "n_layers": 1, "ffn_dim": 32},
        ctc_head=False,
    ).eval()
    assert model.ctc_head is None and model.decoder is not None
    feats = torch.randn(2, 40, 20)
    with torch.no_grad():
        enc, enc_len = model.encode(feats, torch.tensor([40, 30]))
        logits = model.decoder(torch.zeros(2, 3, dtype=torch.long), torch.tensor([3, 2]), enc, enc_len)
    assert logits.shape == (2, 3, V)
