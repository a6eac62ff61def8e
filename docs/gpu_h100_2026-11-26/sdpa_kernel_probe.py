"""Why does bf16 autocast make a training step's memory grow with T^2 on CUDA? And how fast is
full-context inference of a long recording with other query blocks?"""
import sys, time, warnings, json
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
sys.path.insert(0, ".")
import asr_pe.models.attention_fast_paths as fp
from asr_pe.bench.config import BenchConfig
from asr_pe.bench import runner

dev = torch.device("cuda")
seen = []
real = F.scaled_dot_product_attention
def spy(q, k, v, attn_mask=None, dropout_p=0.0, **kw):
    if len(seen) < 3:
        seen.append(dict(q=str(q.dtype), k=str(k.dtype), v=str(v.dtype), qshape=list(q.shape),
                         qstride=list(q.stride()), kstride=list(k.stride()),
                         mask=None if attn_mask is None else (str(attn_mask.dtype), list(attn_mask.shape), list(attn_mask.stride())),
                         dropout=dropout_p, kw=str(kw)))
    return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, **kw)
F.scaled_dot_product_attention = spy
cfg = BenchConfig(device="cuda")
T = 2000
for pe in ["none", "rope"]:
    m = runner.build_model(pe, cfg, T).to(dev).train()
    x, L = runner._batch(cfg, T, dev)
    for prec in ["32", "bf16"]:
        for backends in (None, [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
            seen.clear()
            torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
            err = ""
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                try:
                    if backends:
                        with sdpa_kernel(backends):
                            runner.train_step(m, x, L, prec)
                    else:
                        runner.train_step(m, x, L, prec)
                except Exception as e:
                    err = f"{type(e).__name__}: {str(e)[:300]}"
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            print(json.dumps(dict(pe=pe, prec=prec, fused_only=bool(backends), peak_mb=round(peak), err=err,
                                  warnings=[str(x.message)[:400] for x in w][:4], first_calls=seen[:1])), flush=True)
# long recording: full-context inference with other blocks (10 min, none and rope)
from asr_pe.bench.long_worker import long_worker
for pe in ["none", "rope"]:
    for block in ["auto", 2048, None]:
        spec = runner.long_spec(BenchConfig(mode="long", threads=4, block_size=block), pe, 10, "full", "cuda")
        spec["block_size"] = block
        t0 = time.time()
        try:
            r = long_worker(spec)
        except Exception as e:
            r = {"err": f"{type(e).__name__}: {str(e)[:200]}"}
        print(json.dumps(dict(pe=pe, minutes=10, block=block, **r, wall=round(time.time() - t0, 1))), flush=True)
