"""Chunked inference: the kept parts of the windows partition the frames (nothing lost, nothing
duplicated, order kept), each kept frame had the promised context, chunks align with the
front end's subsampling grid, and one chunk covering an utterance equals the plain encoder."""

import pytest
import torch
from torch import nn

from asr_pe.inference.chunked import (
    Window,
    chunk_windows,
    encode_chunked,
    encode_chunks,
    seconds_to_frames,
)
from asr_pe.models.asr import build_asr_model


@pytest.mark.parametrize("overlap", [0, 1, 4, 9])
@pytest.mark.parametrize("chunk", [1, 3, 7, 10])
def test_windows_partition_the_frames_with_context(chunk, overlap):
    for n in range(41):
        windows = chunk_windows(n, chunk, overlap)
        kept = [t for w in windows for t in range(w.keep_start, w.keep_end)]
        assert kept == list(range(n)), (n, chunk, overlap)  # every frame once, in order
        for w in windows:
            assert 0 <= w.start <= w.keep_start < w.keep_end <= w.end <= n
            assert w.keep_end - w.keep_start <= chunk
            assert w.keep_start - w.start == min(overlap, w.keep_start)  # left context, clipped at 0
            assert w.end - w.keep_end == min(overlap, n - w.keep_end)  # right context, clipped at n


def test_window_values():
    assert chunk_windows(10, 4, 2) == [Window(0, 6, 0, 4), Window(2, 10, 4, 8), Window(6, 10, 8, 10)]
    assert chunk_windows(0, 4, 2) == []


def test_seconds_to_frames_and_bad_arguments():
    assert seconds_to_frames(20.0, 4.0, 0.04) == (500, 100)
    assert seconds_to_frames(0.01, 0.0, 0.04) == (1, 0)  # never a zero-frame chunk
    with pytest.raises(ValueError, match="chunk_s"):
        seconds_to_frames(0.0, 1.0, 0.04)
    with pytest.raises(ValueError, match="overlap_s"):
        seconds_to_frames(1.0, -1.0, 0.04)
    with pytest.raises(ValueError, match="chunk"):
        chunk_windows(5, 0, 1)


class ProbeEncoder(nn.Module):
    """Output channel 0: the input's channel 0 (the global frame index written there);
    channel 1: the frame's index inside its window; channel 2: frames after it in the window.
    Padded frames are 0, as the real encoders leave them."""

    d_model = 3

    def forward(self, x, lengths):
        B, W, _ = x.shape
        t = torch.arange(W, dtype=x.dtype)[None, :].expand(B, W)
        after = lengths[:, None].to(x.dtype) - 1 - t
        out = torch.stack((x[..., 0], t, after), dim=-1)  # (B, W, 3)
        valid = t < lengths[:, None]
        return out * valid[..., None], lengths


@pytest.mark.parametrize("chunk,overlap,batch_chunks", [(5, 2, 1), (5, 2, 3), (8, 0, 16), (3, 7, 4), (100, 3, 2)])
def test_stitching_keeps_every_frame_once_with_its_context(chunk, overlap, batch_chunks):
    lengths = torch.tensor([37, 12, 1, 25])
    T = int(lengths.max())
    x = torch.zeros(len(lengths), T, 3)
    x[..., 0] = torch.arange(1, T + 1, dtype=torch.float32)  # global index + 1 (0 means "lost")
    out = encode_chunks(ProbeEncoder(), x, lengths, chunk, overlap, batch_chunks)
    assert out.shape == (len(lengths), T, 3)
    for b, n in enumerate(lengths.tolist()):
        # each frame came back exactly once, in order, from its own position
        assert out[b, :n, 0].tolist() == list(range(1, n + 1))
        assert (out[b, n:] == 0).all()
        t = torch.arange(n, dtype=torch.float32)
        left, right = out[b, :n, 1], out[b, :n, 2]
        # context inside the window: >= overlap each side, except where the recording ends
        assert (left >= torch.minimum(t, torch.tensor(float(overlap)))).all()
        assert (right >= torch.minimum(n - 1 - t, torch.tensor(float(overlap)))).all()
        # and the window never exceeds chunk + 2·overlap frames
        assert (left + right + 1 <= chunk + 2 * overlap).all()


D = 16


def tiny_model(pe, seed=0):
    torch.manual_seed(seed)
    return build_asr_model(
        vocab_size=12, in_features=20, frontend={"kind": "conv2d", "channels": 8},
        encoder={"kind": "conformer", "d_model": D, "n_heads": 4, "n_layers": 2, "ffn_dim": 32, "conv_kernel": 5,
                 "dropout": 0.0},
        pe=pe,
    ).eval()


@pytest.mark.parametrize("pe", ["none", "cape", "rope", "relative", "rem"])
def test_one_chunk_covering_the_utterance_equals_plain_encoder(pe):
    model = tiny_model(pe)
    g = torch.Generator().manual_seed(1)
    feats, lengths = torch.randn(2, 203, 20, generator=g), torch.tensor([203, 150])
    with torch.no_grad():
        ref, ref_len = model.encode(feats, lengths)
        # 50 frames = 2 s at 40 ms: chunk 1 s + 1 s of context each side covers all 50
        out, out_len = encode_chunked(model, feats, lengths, chunk_s=1.0, overlap_s=1.0)
    assert torch.equal(out_len, ref_len)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_chunks_are_independent_utterances_on_the_encoder_frame_grid():
    """A kept frame equals the plain encoder run on its window alone: chunk boundaries fall on
    encoder frames (front end computed exactly), and each window is encoded on its own."""
    model = tiny_model("cape")
    g = torch.Generator().manual_seed(2)
    feats, lengths = torch.randn(1, 403, 20, generator=g), torch.tensor([403])
    chunk, overlap = seconds_to_frames(0.4, 0.12, model.frame_shift_s)  # 10 and 3 frames
    with torch.no_grad():
        out, out_len = encode_chunked(model, feats, lengths, chunk_s=0.4, overlap_s=0.12, batch_chunks=3)
        x, x_len = model.frontend(feats, lengths)  # (1, 100, D): ((403 − 3)//2 + 1 − 3)//2 + 1
        assert int(out_len[0]) == int(x_len[0]) == 100
        for w in chunk_windows(100, chunk, overlap):
            alone, _ = model.encoder(x[:, w.start:w.end], torch.tensor([w.end - w.start]))
            torch.testing.assert_close(out[0, w.keep_start:w.keep_end],
                                       alone[0, w.keep_start - w.start: w.keep_end - w.start], atol=1e-5, rtol=1e-5)
