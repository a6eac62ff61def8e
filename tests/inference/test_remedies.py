"""Inference remedies as a user switches them on: the spec, the model they change (and restore),
refusals that say what to do, and per-utterance encoding under a length-dependent remedy."""

from __future__ import annotations

import pytest
import torch

from asr_pe.inference.remedies import (
    Remedy,
    RemedyError,
    check_remedies,
    one_by_one,
    parse_remedies,
    per_utterance,
    remedies_applied,
    remedy_label,
    remedy_suffix,
)
from asr_pe.models.asr import build_asr_model
from asr_pe.models.positional.rope import RopeScaling


def _model(pe: str):
    torch.manual_seed(0)
    return build_asr_model(
        vocab_size=11, in_features=16,
        frontend={"kind": "conv1d"},
        encoder={"kind": "transformer", "d_model": 32, "n_heads": 4, "n_layers": 2, "dropout": 0.0},
        pe=pe,
    ).eval()


def test_parse_names_values_and_combinations():
    assert parse_remedies(None) == [] and parse_remedies("none") == [] and parse_remedies("") == []
    assert parse_remedies("window") == [Remedy("window")]
    assert parse_remedies("rope_yarn+window:10") == [Remedy("rope_yarn"), Remedy("window", 10.0)]
    assert remedy_label(parse_remedies("rope_yarn+window:10")) == "rope_yarn+window:10"
    assert remedy_suffix(parse_remedies("window:2.5")) == "_window2p5"
    assert remedy_suffix(parse_remedies("logit_scale+window")) == "_logit_scale_window"
    assert remedy_suffix([]) == ""
    assert per_utterance(parse_remedies("rope_pi")) and not per_utterance(parse_remedies("window+logit_scale"))


def test_which_runs_a_remedy_applies_to_and_the_shell_entry_point(capsys):
    from asr_pe.inference.remedy_specs import applies_to, main

    assert applies_to(parse_remedies("window:2.5+logit_scale"), "t5")
    assert applies_to(parse_remedies("rope_yarn+window"), "rope") and applies_to(parse_remedies("rope_pi"), "cape+rope")
    assert not applies_to(parse_remedies("rope_ntk"), "sinusoidal")
    assert not applies_to(parse_remedies("rope_pi"), "rope_pi")  # trained rescaled: check_remedies refuses a second
    assert main(["suffix", "rope_yarn+window:2.5"]) == 0 and capsys.readouterr().out == "_rope_yarn_window2p5\n"
    assert main(["applies", "window", "t5"]) == 0 and capsys.readouterr().out == "yes\n"
    assert main(["applies", "rope_pi", "t5"]) == 0 and capsys.readouterr().out == "no\n"
    assert main(["suffix", "windw"]) == 2 and "error: " in capsys.readouterr().err


@pytest.mark.parametrize("spec, match", [
    ("windows", "unknown remedy 'windows'"),
    ("rope_pi:3", "takes no value"),
    ("window:abc", "needs a number"),
    ("window:0", "must be > 0"),
    ("rope_pi+rope_ntk", "choose one of"),
    ("window+window:3", "given twice"),
])
def test_bad_specs_say_what_to_do(spec, match):
    with pytest.raises(RemedyError, match=match):
        parse_remedies(spec)


def test_rope_rescaling_refused_for_a_model_without_rope():
    with pytest.raises(RemedyError, match="pe=rope only"):
        check_remedies(_model("sinusoidal"), parse_remedies("rope_ntk"), "sinusoidal")
    check_remedies(_model("rope"), parse_remedies("rope_ntk+window"), "rope")


def test_remedies_switch_on_inside_the_block_and_restore_after():
    model = _model("rope")
    shift = model.frame_shift_s
    with remedies_applied(model, parse_remedies("rope_yarn+window:2+logit_scale"), train_seconds=5.0):
        train_frames = round(5.0 / shift)
        assert all(layer.attn.window == round(2 / shift) for layer in model.encoder.layers)
        assert all(layer.attn.logit_scale_keys == train_frames for layer in model.encoder.layers)
        assert all(h.scaling == RopeScaling("yarn", train_frames) for h in model.encoder.pe.attention)
    assert all(layer.attn.window is None and layer.attn.logit_scale_keys is None for layer in model.encoder.layers)
    assert all(h.scaling is None and h.window is None for h in model.encoder.pe.attention)
    with remedies_applied(model, parse_remedies("window"), train_seconds=5.0):  # W defaults to L_tr
        assert model.encoder.layers[0].attn.window == round(5.0 / shift)


def test_remedies_restore_the_model_after_an_error():
    model = _model("none")
    with pytest.raises(RuntimeError):
        with remedies_applied(model, parse_remedies("window:1"), train_seconds=5.0):
            raise RuntimeError("decoding failed")
    assert model.encoder.layers[0].attn.window is None


@pytest.mark.parametrize("spec", ["window", "logit_scale", "rope_pi", "rope_ntk", "rope_yarn"])
def test_every_remedy_leaves_inputs_within_the_training_length_as_trained(spec):
    model = _model("rope")
    torch.manual_seed(1)
    feats, lengths = torch.randn(2, 300, 16), torch.tensor([300, 240])  # 3 s at 10 ms
    with torch.no_grad():
        plain = model.encode(feats, lengths)[0]
        with remedies_applied(model, parse_remedies(spec), train_seconds=5.0):
            remedied = model.encode(feats, lengths)[0]
    torch.testing.assert_close(remedied, plain)


@pytest.mark.parametrize("spec", ["window:1", "logit_scale", "rope_pi", "rope_ntk", "rope_yarn"])
def test_every_remedy_changes_inputs_beyond_the_training_length(spec):
    model = _model("rope")
    torch.manual_seed(2)
    feats, lengths = torch.randn(1, 1200, 16), torch.tensor([1200])  # 12 s
    with torch.no_grad():
        plain = model.encode(feats, lengths)[0]
        with remedies_applied(model, parse_remedies(spec), train_seconds=2.0):
            remedied = model.encode(feats, lengths)[0]
    assert (remedied - plain).abs().max() > 1e-4


def test_one_by_one_encodes_each_utterance_alone():
    model = _model("rope")
    torch.manual_seed(3)
    feats, lengths = torch.randn(3, 900, 16), torch.tensor([900, 500, 700])
    with torch.no_grad(), remedies_applied(model, parse_remedies("rope_pi"), train_seconds=2.0):
        enc, enc_lengths = one_by_one(model.encode)(feats, lengths)
        for b in range(3):
            alone, n = model.encode(feats[b:b + 1, : int(lengths[b])], lengths[b:b + 1])
            assert int(n[0]) == int(enc_lengths[b])
            torch.testing.assert_close(enc[b, : int(n[0])], alone[0, : int(n[0])])
            assert enc[b, int(n[0]):].abs().max() == 0 if int(n[0]) < enc.size(1) else True
        batched = model.encode(feats, lengths)[0]
    # in a padded batch every member would be rescaled by the longest one's length
    assert (batched[1, : int(enc_lengths[1])] - enc[1, : int(enc_lengths[1])]).abs().max() > 1e-4


def test_a_training_length_is_required():
    with pytest.raises(RemedyError, match="training length"):
        with remedies_applied(_model("none"), parse_remedies("window"), train_seconds=0):
            pass
