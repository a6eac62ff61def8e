"""Convolutional relative PE of wav2vec 2.0 (Baevski et al. 2020, §2; fairseq ``pos_conv``).

X ← X + GELU(SamePad(Conv1d_wn(X)))

Conv1d over time with ``groups`` = 16, weight norm over the kernel dimension
(``weight_norm(conv, dim=2)``: one gain per kernel tap, as in fairseq), zero bias,
weights ~ N(0, 4/(k·D)). The position signal is content-dependent and local: a frame
learns where it is from its neighbours within the kernel, so there is no length limit.

Kernel length: wav2vec 2.0 uses 128 frames at 20 ms (2.56 s of context). The default here
keeps the *duration*: ``kernel_s`` = 2.56 s is converted with the encoder frame step,
k = round(kernel_s / frame_shift_s) (64 frames at 40 ms). ``kernel`` (frames) overrides it.
For an even k, "same" padding yields T + 1 frames; SamePad drops the last one.

Padded frames are zeroed before the convolution so they cannot leak into valid frames:
a padded batch gives the valid frames the same values as each utterance alone.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from .base import InputPE, register_input_pe


@register_input_pe("conv")
class ConvPE(InputPE):
    def __init__(
        self,
        d_model: int,
        frame_shift_s: float = 0.04,
        kernel_s: float = 2.56,
        kernel: int | None = None,
        groups: int = 16,
    ):
        super().__init__()
        if kernel is None:
            if not (kernel_s > 0 and frame_shift_s > 0):
                raise ValueError(f"conv PE: kernel_s ({kernel_s}) and frame_shift_s ({frame_shift_s}) must be > 0")
            kernel = max(1, round(kernel_s / frame_shift_s))
        kernel = int(kernel)
        if kernel < 1:
            raise ValueError(f"conv PE: kernel must be >= 1 frame, got {kernel}")
        if d_model % groups != 0:
            raise ValueError(f"conv PE: d_model {d_model} is not divisible by groups {groups}; set pe.input.groups")
        self.d_model, self.kernel, self.groups = d_model, kernel, groups
        conv = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2, groups=groups)
        nn.init.normal_(conv.weight, mean=0.0, std=math.sqrt(4.0 / (kernel * d_model)))
        nn.init.zeros_(conv.bias)
        self.conv = weight_norm(conv, name="weight", dim=2)
        self.remove = 1 if kernel % 2 == 0 else 0  # SamePad

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        pad = torch.arange(T, device=x.device)[None, :] >= lengths[:, None]  # (B, T) True = pad
        y = x.masked_fill(pad[..., None], 0.0).transpose(1, 2)  # (B, D, T)
        y = self.conv(y)  # (B, D, T + remove)
        if self.remove:
            y = y[..., : -self.remove]  # (B, D, T)
        return x + F.gelu(y).transpose(1, 2)  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, kernel={self.kernel}, groups={self.groups}"
