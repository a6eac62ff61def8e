"""Attention and joint CTC/attention decoding of a (random, tiny) ASRModel.

The search's attention score of a hypothesis must be its teacher-forced log-likelihood under
the decoder (sum of log_softmax at the target ids, eos included); beam 1 must be greedy
decoding; joint decoding with ctc_weight 0 must be attention decoding, and with a CTC weight
its CTC score must be the full-sequence CTC log-likelihood (= -F.ctc_loss).
"""

import pytest
import torch
import torch.nn.functional as F

from asr_pe.data.tokenizer import CharTokenizer
from asr_pe.decoding.attention_decoding import attention_decode, decode_utterance
from asr_pe.decoding.beam_search import greedy_search
from asr_pe.models.asr import build_asr_model

D, H = 16, 2
TOK = CharTokenizer(list("abc "))  # ids: blank 0, 'a'..' ' 1..4, sos = eos = 5


def make_model(ctc_head=True, decoder_pe="sinusoidal", seed=0, eos_bias=0.0):
    torch.manual_seed(seed)
    model = build_asr_model(
        vocab_size=TOK.vocab_size,
        in_features=12,
        frontend={"kind": "conv2d", "factor": 4, "channels": 4},
        encoder={"kind": "transformer", "d_model": D, "n_heads": H, "n_layers": 1, "ffn_dim": 32, "dropout": 0.0},
        pe="sinusoidal",
        decoder={"n_layers": 2, "n_heads": H, "ffn_dim": 32, "dropout": 0.0, "pe": decoder_pe},
        ctc_head=ctc_head,
    ).eval()
    with torch.no_grad():
        # A fresh pre-LN decoder predicts nearly the same token whatever the prefix; larger random
        # weights give prefix-dependent, sharp distributions, so the beam and the blank rule matter.
        for name, p in model.decoder.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 2.0 / p.shape[1] ** 0.5)
            elif "norm" not in name:
                p.normal_(0.0, 0.5)
        model.decoder.output.bias[TOK.eos_id] += eos_bias
    return model


def encode(model, lengths=(64, 48), seed=1):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(len(lengths), max(lengths), 12, generator=g)
    with torch.no_grad():
        return model.encode(feats, torch.tensor(lengths))


def teacher_forced_ll(model, enc_one, ids):
    """Sum over [ids, eos] of log_softmax(decoder logits) with input [sos, ids]."""
    dec_in = torch.tensor([[TOK.sos_id] + ids])
    target = torch.tensor(ids + [TOK.eos_id])
    with torch.no_grad():
        logits = model.decoder(dec_in, torch.tensor([len(ids) + 1]), enc_one[None], torch.tensor([enc_one.size(0)]))
    return float(torch.log_softmax(logits[0].double(), -1).gather(1, target[:, None]).sum())


ATTN = {"method": "attention", "beam": 4, "length_penalty": 1.0, "max_len_ratio": 1.0}


@pytest.mark.parametrize("decoder_pe", ["sinusoidal", "rope"])
def test_beam_scores_are_teacher_forced_log_likelihoods(decoder_pe):
    model = make_model(decoder_pe=decoder_pe, eos_bias=2.0)
    enc, enc_len = encode(model)
    enc_one = enc[0, : enc_len[0]]
    hyps = decode_utterance(model, enc_one, TOK, {**ATTN, "length_penalty": 0.5}, nbest=4)
    assert len(hyps) >= 2
    for h in hyps:
        ll = teacher_forced_ll(model, enc_one, h.ids)
        assert h.components["att"] == pytest.approx(ll, abs=1e-4)
        assert h.components["length"] == len(h.ids) + 1
        assert h.score == pytest.approx(h.components["total"] / (len(h.ids) + 1) ** 0.5, abs=1e-9)
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


@pytest.mark.parametrize("seed", range(3))
def test_beam_one_equals_greedy(seed):
    model = make_model(seed=seed, eos_bias=1.0)
    enc, enc_len = encode(model, seed=seed)
    enc_one = enc[1, : enc_len[1]]
    best = decode_utterance(model, enc_one, TOK, {**ATTN, "beam": 1})[0]
    # independent reference: argmax of the recomputing step function until eos or max_len

    def step(tokens, _state):
        return model.decoder.step_log_probs(tokens, enc_one[None], enc_len[1:2]), None

    greedy = greedy_search(step, sos=TOK.sos_id, eos=TOK.eos_id, encoder_length=int(enc_len[1]))
    assert best.ids == greedy.ids
    assert best.components["att"] == pytest.approx(greedy.components["att"], abs=1e-4)
    ids, tokens = [], torch.tensor([[TOK.sos_id]])
    for _ in range(int(enc_len[1])):
        with torch.no_grad():
            nxt = int(model.decoder.step_log_probs(tokens, enc_one[None], enc_len[1:2])[0].argmax())
        if nxt == TOK.eos_id:
            break
        ids.append(nxt)
        tokens = torch.cat([tokens, torch.tensor([[nxt]])], dim=1)
    assert best.ids == ids


def test_joint_with_zero_ctc_weight_equals_attention():
    model = make_model(eos_bias=1.5)
    enc, enc_len = encode(model)
    enc_one = enc[0, : enc_len[0]]
    att = decode_utterance(model, enc_one, TOK, ATTN, nbest=4)
    joint = decode_utterance(model, enc_one, TOK, {**ATTN, "method": "joint", "ctc_weight": 0.0}, nbest=4)
    assert [h.ids for h in joint] == [h.ids for h in att]
    assert [h.score for h in joint] == pytest.approx([h.score for h in att], abs=1e-9)
    assert all(h.components["ctc"] is not None for h in joint)


def test_joint_ctc_score_is_the_ctc_log_likelihood():
    model = make_model(eos_bias=1.5)
    enc, enc_len = encode(model)
    enc_one = enc[0, : enc_len[0]]
    lam = 0.4
    hyps = decode_utterance(model, enc_one, TOK, {**ATTN, "method": "joint", "ctc_weight": lam}, nbest=4)
    with torch.no_grad():
        log_probs = model.ctc_log_probs(enc_one[None])[0]  # (T, V)
    for h in hyps:
        if not h.ids:
            continue
        nll = F.ctc_loss(log_probs[:, None].double(), torch.tensor([h.ids]), torch.tensor([log_probs.size(0)]),
                         torch.tensor([len(h.ids)]), blank=TOK.blank_id, reduction="sum")
        assert h.components["ctc"] == pytest.approx(-float(nll), abs=1e-5)
        expected = (1 - lam) * h.components["att"] + lam * h.components["ctc"]
        assert h.components["total"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("method", ["attention", "joint"])
def test_attention_decode_batch(method):
    """Per-utterance results of a padded batch; ids are labels the tokenizer can decode."""
    model = make_model(eos_bias=1.0)
    enc, enc_len = encode(model)
    decode = {**ATTN, "method": method, "ctc_weight": 0.3}
    hyps = attention_decode(model, enc, enc_len, TOK, decode)
    assert len(hyps) == 2
    for b, ids in enumerate(hyps):
        assert all(0 < i < TOK.eos_id for i in ids), "no blank, sos or eos in a hypothesis"
        assert len(ids) <= int(enc_len[b])  # max_len_ratio 1.0
        assert isinstance(TOK.decode(ids), str)
        alone = decode_utterance(model, enc[b, : enc_len[b]], TOK, decode)[0].ids
        assert ids == alone


def test_max_len_ratio_bounds_the_output():
    model = make_model(eos_bias=-20.0)  # eos never wins: every hypothesis runs to the limit
    enc, enc_len = encode(model)
    hyps = attention_decode(model, enc, enc_len, TOK, {**ATTN, "max_len_ratio": 0.25})
    assert [len(h) for h in hyps] == [int(0.25 * int(n)) for n in enc_len]


def test_clear_errors():
    enc_model = make_model(ctc_head=False)
    enc, enc_len = encode(enc_model)
    with pytest.raises(ValueError, match="needs a CTC head"):
        attention_decode(enc_model, enc, enc_len, TOK, {**ATTN, "method": "joint"})
    with pytest.raises(ValueError, match="choose one of"):
        attention_decode(enc_model, enc, enc_len, TOK, {**ATTN, "method": "greedy"})
    ctc_only = make_model()
    ctc_only.decoder = None
    with pytest.raises(ValueError, match="needs an attention decoder"):
        attention_decode(ctc_only, enc, enc_len, TOK, ATTN)


def test_blank_is_never_an_output_label():
    """A decoder that favours the CTC blank still yields blank-free hypotheses, scored by their
    teacher-forced log-likelihood (blank is dropped from the candidates, not renormalised)."""
    model = make_model(eos_bias=1.0)
    with torch.no_grad():
        model.decoder.output.bias[TOK.blank_id] += 30.0
    enc, enc_len = encode(model)
    enc_one = enc[0, : enc_len[0]]
    for h in decode_utterance(model, enc_one, TOK, ATTN, nbest=4):
        assert TOK.blank_id not in h.ids
        assert h.components["att"] == pytest.approx(teacher_forced_ll(model, enc_one, h.ids), abs=1e-4)
