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

Speed: a grouped convolution with a long kernel is slow on CPU (oneDNN's grouped backward
above all: the PE cost 7 % of a Conformer step at T = 250). For kernels of
``FFT_MIN_KERNEL`` taps or more it is computed by FFT (``grouped_conv1d_fft``: O(T log T)
per channel instead of O(T·k), the same result to float rounding, ~1e-6); shorter kernels use
``F.conv1d``. Both go through the weight-normed weight, so parametrisation and gradients
are unchanged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from .base import InputPE, register_input_pe

FFT_MIN_KERNEL = 16


def _fast_len(n: int) -> int:
    """Smallest m >= n whose prime factors are 2, 3 and 5 (fast FFT sizes)."""
    m = n
    while True:
        r = m
        for p in (2, 3, 5):
            while r % p == 0:
                r //= p
        if r == 1:
            return m
        m += 1


def grouped_conv1d_fft(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int,
                       groups: int) -> torch.Tensor:
    """``F.conv1d(x, weight, bias, padding=padding, groups=groups)`` computed by FFT.

    x (B, C, T), weight (C_out, C/groups, k) -> (B, C_out, T + 2·padding − k + 1). Conv1d is a
    cross-correlation, y[t] = Σ_k w[k]·x_p[t + k] (x_p the zero-padded input), i.e. entry
    t + k − 1 of the linear convolution of x_p with the flipped kernel. Those entries lie in
    [k − 1, n − 1] (n = len(x_p)), where a circular convolution of any length L >= n does not
    wrap, so one rfft of length L >= n per channel suffices. Groups become a batched
    (C_out/groups × C/groups) complex product per frequency."""
    B = x.size(0)
    C_out, C_g, k = weight.shape
    G, O_g = groups, C_out // groups
    xp = F.pad(x, (padding, padding))  # (B, C, n)
    n = xp.size(-1)
    T_out = n - k + 1
    L = _fast_len(n)
    xf = torch.fft.rfft(xp.float(), n=L)  # (B, C, L/2 + 1)
    wf = torch.fft.rfft(weight.float().flip(-1), n=L)  # (C_out, C_g, L/2 + 1)
    n_f = xf.size(-1)
    yf = torch.einsum("bgif,goif->bgof", xf.view(B, G, C_g, n_f), wf.view(G, O_g, C_g, n_f))  # (B, G, O_g, F)
    y = torch.fft.irfft(yf.reshape(B, C_out, n_f), n=L)[..., k - 1: k - 1 + T_out]  # (B, C_out, T_out)
    if bias is not None:
        y = y + bias.float()[None, :, None]
    return y.to(x.dtype)


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
        if self.kernel >= FFT_MIN_KERNEL:
            y = grouped_conv1d_fft(y, self.conv.weight, self.conv.bias, self.kernel // 2, self.groups)
        else:
            y = self.conv(y)  # (B, D, T + remove)
        if self.remove:
            y = y[..., : -self.remove]  # (B, D, T)
        return x + F.gelu(y).transpose(1, 2)  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, kernel={self.kernel}, groups={self.groups}"
