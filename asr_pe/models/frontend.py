"""Convolutional subsampling front ends: features (B, T, F) at 10 ms -> (B, T', D).

* ``Conv2dSubsampling`` (factor 4, ESPnet/WeNet style): two 3x3 stride-2 Conv2d + ReLU, 40 ms frames.
* ``Conv1dSubsampling`` (CAPE's TED-LIUM/LibriSpeech front end): Conv1d kernel 7 stride 3 with
  GLU, 30 ms frames.

Both take ``context_kernel=k``: a Conv1d over the output frames (kernel k, "same" padding, ReLU,
residual) that widens the receptive field by (k - 1) output frames. A position-free encoder sees
order only through its front end, so this is the knob that lets ``pe=none`` and the input-stage
PEs resolve neighbouring characters (see recipes/synth/RESULTS.md).

Padded input frames are zeroed before convolving so that no padding leaks into valid outputs,
and output lengths count only frames whose receptive field lies inside the valid input.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import make_pad_mask


class TemporalContext(nn.Module):
    """x + ReLU(Conv1d_k(x)) over time on (B, T, D) frames; padded frames are zeroed first so the
    "same" padding of the last valid frames sees silence, not whatever the padding holds."""

    def __init__(self, d_model: int, kernel: int):
        super().__init__()
        assert kernel % 2 == 1, f"context_kernel must be odd, got {kernel}"
        self.conv = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = x.masked_fill(make_pad_mask(lengths, x.size(1))[..., None], 0.0)
        return x + torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)  # (B, T', D)


class Conv2dSubsampling(nn.Module):
    def __init__(self, in_features: int, d_model: int, channels: int | None = None, factor: int = 4,
                 context_kernel: int = 0):
        super().__init__()
        assert factor in (4, 6, 8), f"Conv2dSubsampling supports factor 4, 6 or 8, got {factor}"
        channels = channels or d_model
        # (kernel, stride) per conv; the product of strides is the factor
        self.convs_ks = {4: [(3, 2), (3, 2)], 6: [(3, 2), (5, 3)], 8: [(3, 2), (3, 2), (3, 2)]}[factor]
        layers: list[nn.Module] = []
        c_in, f = 1, in_features
        for k, s in self.convs_ks:
            layers += [nn.Conv2d(c_in, channels, k, s), nn.ReLU()]
            c_in, f = channels, (f - k) // s + 1
        self.conv = nn.Sequential(*layers)
        self.out = nn.Linear(channels * f, d_model)
        self.context = TemporalContext(d_model, context_kernel) if context_kernel else None
        self.factor = factor
        self.frame_shift_s = 0.01 * factor

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        for k, s in self.convs_ks:
            lengths = torch.div(lengths - k, s, rounding_mode="floor") + 1
        return lengths.clamp(min=0)

    def min_input_frames(self) -> int:
        n = 1
        for k, s in reversed(self.convs_ks):
            n = (n - 1) * s + k
        return n

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, out_lengths = self.subsample(x, lengths)
        return (x if self.context is None else self.context(x, out_lengths)), out_lengths

    def subsample(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The strided stack alone (no context conv): output frame t reads input frames
        [factor·t, factor·t + min_input_frames()), which is what chunked inference relies on."""
        T = x.size(1)
        if T < self.min_input_frames():
            raise ValueError(
                f"input of {T} feature frames is shorter than the front end's receptive field "
                f"({self.min_input_frames()} frames)"
            )
        x = x.masked_fill(make_pad_mask(lengths, T)[..., None], 0.0)
        x = self.conv(x.unsqueeze(1))  # (B, C, T', F')
        B, C, Tp, Fp = x.shape
        x = self.out(x.transpose(1, 2).reshape(B, Tp, C * Fp))  # (B, T', D)
        return x, self.output_lengths(lengths)


class Conv1dSubsampling(nn.Module):
    def __init__(self, in_features: int, d_model: int, kernel: int = 7, stride: int = 3, glu: bool = True,
                 context_kernel: int = 0):
        super().__init__()
        self.kernel, self.stride, self.glu = kernel, stride, glu
        self.conv = nn.Conv1d(in_features, 2 * d_model if glu else d_model, kernel, stride)
        self.context = TemporalContext(d_model, context_kernel) if context_kernel else None
        self.factor = stride
        self.frame_shift_s = 0.01 * stride

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        return (torch.div(lengths - self.kernel, self.stride, rounding_mode="floor") + 1).clamp(min=0)

    def min_input_frames(self) -> int:
        return self.kernel

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, out_lengths = self.subsample(x, lengths)
        return (y if self.context is None else self.context(y, out_lengths)), out_lengths

    def subsample(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The strided conv alone (no context conv); see ``Conv2dSubsampling.subsample``."""
        T = x.size(1)
        if T < self.kernel:
            raise ValueError(f"input of {T} feature frames is shorter than the kernel ({self.kernel})")
        x = x.masked_fill(make_pad_mask(lengths, T)[..., None], 0.0)
        y = self.conv(x.transpose(1, 2))  # (B, C, T')
        y = nn.functional.glu(y, dim=1) if self.glu else torch.relu(y)
        return y.transpose(1, 2), self.output_lengths(lengths)  # (B, T', D)


def build_frontend(kind: str, in_features: int, d_model: int, **options) -> nn.Module:
    if kind == "conv2d":
        return Conv2dSubsampling(in_features, d_model, **options)
    if kind == "conv1d":
        return Conv1dSubsampling(in_features, d_model, **options)
    raise ValueError(f"unknown front end {kind!r}; choose conv2d or conv1d")
