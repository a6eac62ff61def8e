"""The SDPA backend choice of `asr_pe.models.attention_fast_paths.sdpa`: a masked call on CUDA keeps
off cuDNN's kernel while the installed cuDNN has pytorch/pytorch#196678 (NaN in grad_q when a mask
is passed, T % 128 == 64 and a row's logsumexp is below about -88.7; fixed in cuDNN 9.26)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from asr_pe.models import attention_fast_paths as fast
from asr_pe.models.attention_fast_paths import CUDNN_MASKED_BACKWARD_FIXED, masked_sdpa_backends, sdpa

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_masked_calls_on_cuda_keep_off_cudnn_until_its_fix():
    for version in (91900, 92400, 92501, None):  # None: torch could not tell; stay off it too
        backends = masked_sdpa_backends("cuda", True, version)
        assert SDPBackend.CUDNN_ATTENTION not in backends and SDPBackend.EFFICIENT_ATTENTION in backends
        assert SDPBackend.MATH in backends  # torch can always fall back to the written-out path
    assert masked_sdpa_backends("cuda", True, CUDNN_MASKED_BACKWARD_FIXED) is None  # 9.26: torch chooses
    assert masked_sdpa_backends("cuda", True, 100000) is None
    assert masked_sdpa_backends("cuda", False, 92400) is None  # no mask: the bug needs one
    assert masked_sdpa_backends("cpu", True, 92400) is None  # CPU: no cuDNN kernel


def test_the_pinned_torch_needs_the_guard():
    """torch 2.14.1 ships cuDNN 9.24.0.43 (its nvidia-cudnn-cu13 pin), older than the fix."""
    if torch.__version__.startswith("2.14.1") and torch.backends.cudnn.version() is not None:
        assert torch.backends.cudnn.version() < CUDNN_MASKED_BACKWARD_FIXED


def _spy_kernel(monkeypatch):
    seen = []
    real = fast.sdpa_kernel

    def spy(backends, *a, **k):
        seen.append(list(backends))
        return real(backends, *a, **k)

    monkeypatch.setattr(fast, "sdpa_kernel", spy)
    return seen


def test_sdpa_restricts_the_backends_exactly_when_the_choice_says_so(monkeypatch):
    q, k, v = (torch.randn(2, 2, 24, 8) for _ in range(3))
    mask = torch.rand(2, 1, 24, 24) > 0.2
    mask[..., 0] = True
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    seen = _spy_kernel(monkeypatch)
    torch.testing.assert_close(sdpa(q, k, v, attn_mask=mask), want)
    assert seen == []  # on CPU torch chooses freely
    monkeypatch.setattr(fast, "masked_sdpa_backends", lambda device, has_mask, version: fast.MASKED_BACKENDS
                        if has_mask else None)
    torch.testing.assert_close(sdpa(q, k, v, attn_mask=mask), want)  # same result through the allowed kernels
    torch.testing.assert_close(sdpa(q, k, v, attn_mask=mask, pad_heads=True), want)  # the padded-head call too
    assert seen == [list(fast.MASKED_BACKENDS)] * 2
    sdpa(q, k, v)
    assert len(seen) == 2  # an unmasked call is left alone


@cuda
@pytest.mark.parametrize("L", [704, 1088])
def test_on_cuda_the_bugs_inputs_give_finite_gradients_through_sdpa(L):
    from asr_pe.bench.grad_check import _probe_inputs
    from asr_pe.bench.sdpa_spy import SDPASpy

    q, k, v, mask, d_out = _probe_inputs(L, torch.device("cuda"))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    with SDPASpy() as spy:
        sdpa(q, k, v, attn_mask=mask).backward(d_out)
    used = spy.summary()
    assert "cudnn" not in used["forward"] and "cudnn" not in used["backward"], used
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all() and torch.isfinite(v.grad).all()
    assert math.isfinite(float(q.grad.float().abs().sum()))
