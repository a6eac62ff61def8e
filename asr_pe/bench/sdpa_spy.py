"""Which kernel ``F.scaled_dot_product_attention`` ran: ``SDPASpy`` counts the calls and the fused
backend ops under them (forward and backward).

SDPA is a composite op: torch picks a backend per call (flash, memory-efficient, cuDNN, or the
math path written out in smaller ops) and dispatches to that backend's own aten op. A torch
function mode sees each SDPA call; a dispatch mode below it sees the backend op it became (the
math path has none, so a call without a fused op is counted as math). The autograd engine carries
the dispatch mode into the backward, so the backend ops' ``*_backward`` ops are seen too.
"""

from __future__ import annotations

from collections import Counter

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["BACKEND_OPS", "SDPASpy"]

# aten op (overload packet name) -> backend; the backward ops are these names + "_backward"
BACKEND_OPS = {
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_flash_attention_for_cpu": "flash_cpu",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


class _CountCalls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "scaled_dot_product_attention":
            self.calls += 1
        return func(*args, **(kwargs or {}))


class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name.removesuffix("_backward") in BACKEND_OPS:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


class SDPASpy:
    """``with SDPASpy() as spy: <forward and backward>`` -> ``spy.summary()``:
    {"sdpa_calls": n, "forward": {backend: count}, "backward": {backend: count}}, ``math`` for
    calls that ran no fused op."""

    def __enter__(self):
        self._calls, self._ops = _CountCalls(), _RecordOps()
        self._calls.__enter__()
        self._ops.__enter__()
        return self

    def __exit__(self, *exc):
        self._ops.__exit__(*exc)
        self._calls.__exit__(*exc)
        return False

    def summary(self) -> dict:
        fwd, bwd = Counter(), Counter()
        for name, n in self._ops.ops.items():
            base = name.removesuffix("_backward")
            (bwd if name != base else fwd)[BACKEND_OPS[base]] += n
        math = self._calls.calls - sum(fwd.values())
        if math > 0:
            fwd["math"] += math
        return {"sdpa_calls": self._calls.calls, "forward": dict(fwd), "backward": dict(bwd)}
