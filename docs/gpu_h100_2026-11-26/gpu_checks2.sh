#!/usr/bin/env bash
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
R=/tmp/res; mkdir -p $R; pack() { tar czf $OUT/res.tgz -C /tmp res; }
echo "=== $(date +%T) cuda tests of the head padding"
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/inference/test_fast_paths.py -k "padded or padding" 2>&1 | tail -3
echo "=== $(date +%T) bf16 bench with padded heads"
timeout 70 python3 scripts/bench_attention.py --device cuda --precision bf16 --pes none rope relative alibi shaw --lengths 1000 4000 --reps 5 --warmup 2 --threads 4 --out $R; pack
echo "=== $(date +%T) 60-minute recording, full context, GPU block budget"
timeout 140 python3 scripts/bench_attention.py --mode long --device cuda --minutes 60 --pes none rope relative cape --infer full --timeout 40 --threads 4 --out $R; pack
echo "=== $(date +%T) done"
