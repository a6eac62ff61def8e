"""Benchmarks of the positional encodings' cost, run by ``scripts/bench_attention.py``, and the
cost of one training run of an experiment, run by ``scripts/plan_run.py``.

* `asr_pe.bench.runner`: the options (`BenchConfig`), the train-mode timing and memory
  passes and the long-recording inference sweep, both behind `run_benchmark`;
* `asr_pe.bench.cases`: the cases (every PE plus torchaudio's Conformer) and the cost targets;
* `asr_pe.bench.long_worker`: one long-mode measurement, run in its own child process;
* `asr_pe.bench.measure`: step timing (wall and process CPU time) and peak memory;
* `asr_pe.bench.report`: the CSV and markdown files and the printed table;
* `asr_pe.bench.run_plan`: parameters, checkpoint bytes, training-step memory and FLOPs of an
  experiment per PE at its configured batch (the recipes' "Plan the run" tables);
* `asr_pe.bench.gpu_check`: the GPU check in one call (``scripts/gpu_check.py``), its steps
  `asr_pe.bench.grad_check` (bf16 gradients at T % 128 == 64, the SDPA backend via
  `asr_pe.bench.sdpa_spy`) and `asr_pe.bench.recipe_smoke` (a recipe's smoke run on fixture
  archives), its report `asr_pe.bench.gpu_check_report`.

No Lightning or Hydra here: the benchmark builds encoders and ASR models from `asr_pe.models`.
Modules are imported on use (``python -m asr_pe.bench.long_worker`` must not find itself
already imported).
"""
