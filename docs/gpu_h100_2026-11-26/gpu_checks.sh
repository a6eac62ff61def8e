#!/usr/bin/env bash
# One device call: the LibriSpeech smoke run with trainer=gpu, the per-PE train-step benchmark on
# the GPU (fp32 and bf16), the recipe's run plan measured on CUDA, and long-recording inference.
# Results: $OUT/log.txt and $OUT/res.tgz (re-packed after every step, so a timeout keeps what ran).
export PYTHONUNBUFFERED=1
R=/tmp/res; mkdir -p $R
pack() { tar czf $OUT/res.tgz -C /tmp res; }
step() { echo "=== $(date +%T) $1"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import torch, torchaudio, lightning, hydra, soundfile; print('torch', torch.__version__, 'torchaudio', torchaudio.__version__, 'lightning', lightning.__version__, torch.cuda.get_device_name(), 'cpus', __import__('os').cpu_count())"
S1=${S1:-170}; S2=${S2:-70}; S3=${S3:-70}; S4=${S4:-80}; S5=${S5:-120}
step "1 smoke run trainer=gpu"
timeout $S1 python3 .gpu/recipe_smoke.py /tmp/smoke gpu cuda; echo "smoke exit $?"
mkdir -p $R/smoke; (cd /tmp/smoke/work && find runs -name buckets.csv -o -name metrics.csv -o -name config.yaml -o -name done.json | tar cf - -T - | tar xf - -C $R/smoke) 2>/dev/null
cp -r /tmp/smoke/work/plots $R/smoke/ 2>/dev/null; pack
step "2 train-step bench fp32"
timeout $S2 python3 scripts/bench_attention.py --device cuda --lengths 250 1000 2000 4000 --reps 7 --warmup 2 --threads 4 --out $R; echo "exit $?"; pack
step "3 train-step bench bf16"
timeout $S3 python3 scripts/bench_attention.py --device cuda --precision bf16 --lengths 250 1000 2000 4000 --reps 7 --warmup 2 --threads 4 --out $R; echo "exit $?"; pack
step "4 run plan on cuda"
timeout $S4 python3 scripts/plan_run.py --experiment cape_librispeech --no-checkpoint --device cuda --out $R; echo "exit $?"; pack
step "5 long recording on the GPU"
timeout $S5 python3 scripts/bench_attention.py --mode long --device cuda --minutes 60 --pes none rope relative cape --infer full chunked --timeout 60 --threads 4 --out $R; echo "exit $?"; pack
step "done"
