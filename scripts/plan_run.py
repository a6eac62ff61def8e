#!/usr/bin/env python
"""Measure what one training run of an experiment costs per PE: parameters, checkpoint bytes,
memory and FLOPs of a training step at the configured batch (measured on small models of the
full width, extrapolated; asr_pe/bench/run_plan.py says how). Prints a table and writes
``<out>/run_plan_<experiment>.{csv,md}``.

    python scripts/plan_run.py --experiment cape_librispeech                 # all five PEs, CPU
    python scripts/plan_run.py --experiment cape_tedlium3 --pes cape relative --device cuda
    python scripts/plan_run.py --experiment cape_librispeech --extra data.max_batch_seconds=300

On a shared CPU run it with one thread (``OMP_NUM_THREADS=1``, the default ``--threads 1``):
the memory is what is measured there, the time is not. On CPU the step runs in fp32 unless
``--precision bf16-mixed`` is given: a CPU without bf16 instructions runs bf16 matmuls about 50x
slower than fp32 (0.11 against 6.3 GFLOP/s on one core of the development machine). Needs about 4.5 GB of memory for the
256 M-parameter checkpoint (``--no-checkpoint`` skips it) and as many GB free in ``--checkpoint-dir``.
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("frontend", "encoder", "pe", "data", "loss", "optim", "trainer")
PES = ["none", "sinusoidal", "relative", "rope", "cape"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experiment", required=True, help="conf/experiment/<name>.yaml, e.g. cape_librispeech")
    p.add_argument("--pes", nargs="+", default=PES, help=f"PEs (conf/pe/); default: {' '.join(PES)}")
    p.add_argument("--extra", nargs="*", default=[], help="Hydra overrides, e.g. data.max_batch_seconds=300")
    p.add_argument("--layers", nargs=2, type=int, default=[1, 2], help="the two layer counts measured")
    p.add_argument("--no-checkpoint", dest="checkpoint", action="store_false", help="skip the checkpoint size")
    p.add_argument("--checkpoint-dir", default=None, help="where the checkpoint is written and removed (default: temp)")
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    p.add_argument("--precision", default="auto",
                   help="auto: 32-true on CPU (bf16 without CPU support runs ~50x slower), the trainer's on "
                        "CUDA | 32-true | bf16-mixed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="bench_results", help="folder for the CSV and markdown (empty: none)")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if not 1 <= args.layers[0] < args.layers[1]:
        p.error("--layers takes two increasing counts >= 1")
    return args


def compose_sections(experiment: str, pe: str, extra: list[str]) -> dict:
    """The experiment's config for one PE as train.py composes it, the model's sections only."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    try:
        with initialize_config_dir(str(REPO / "conf"), version_base="1.3"):
            cfg = compose("train", overrides=[f"experiment={experiment}", f"pe={pe}", *extra])
    except HydraException as e:
        print(f"error: experiment={experiment} pe={pe}: {str(e).splitlines()[0]}", file=sys.stderr)
        raise SystemExit(2)
    return {k: OmegaConf.to_container(cfg[k], resolve=True) for k in SECTIONS}


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from asr_pe.bench.run_plan import PlanConfig, markdown, plan_rows, write_outputs

    torch.set_num_threads(args.threads)
    sections = {pe: compose_sections(args.experiment, pe, args.extra) for pe in args.pes}
    precision = args.precision
    if precision == "auto":  # None: the trainer's own precision
        precision = "32-true" if args.device == "cpu" else None
    cfg = PlanConfig(experiment=args.experiment, sections=sections, layers=tuple(args.layers),
                     checkpoint=args.checkpoint,
                     checkpoint_dir=args.checkpoint_dir, device=args.device, precision=precision,
                     out=args.out or None, argv=args.argv)
    rows = plan_rows(cfg, log=lambda m: print(m, flush=True))
    print(markdown(rows, cfg))
    written = write_outputs(rows, cfg)
    if written:
        print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
