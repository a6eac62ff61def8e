# Second device call (2026-11-27): CUDA tests, Shaw's key bias before (old.tar.gz: the code of run_1.sh)
# and after the row-layout change (clean.tar.gz) on the same machine, and long mode for conv.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/pip.log 2>&1 || { tail -5 /tmp/pip.log; exit 3; }
mkdir -p /tmp/w /tmp/old /tmp/r && tar xzf .gpuck/clean.tar.gz -C /tmp/w && tar xzf .gpuck/old.tar.gz -C /tmp/old || exit 4
cd /tmp/w; export PYTHONPATH=/tmp/site:/tmp/w
timeout 60 python3 -m pytest -q -p no:cacheprovider -rs tests/models/test_sdpa_backend_choice.py tests/models/test_shaw_layout_choice.py 2>&1 | tail -6 | tee /tmp/r/pytest.txt
for v in old w; do (cd /tmp/$v && PYTHONPATH=/tmp/site:/tmp/$v timeout 75 python3 scripts/bench_attention.py --device cuda --precision bf16 --pes none shaw relative t5 --lengths 1000 4000 --reps 5 --warmup 2 --mem-reps 1 --threads 4 --no-reference --out /tmp/r/shaw_$v > /tmp/r/shaw_$v.log 2>&1); echo "== $v"; tail -6 /tmp/r/shaw_$v/*.md; done
timeout 45 python3 scripts/bench_attention.py --mode long --device cuda --minutes 60 --pes conv --infer full --threads 4 --timeout 35 --out /tmp/r/long_conv > /tmp/r/long_conv.log 2>&1; tail -3 /tmp/r/long_conv/*.md
tar czf $OUT/r.tgz -C /tmp r
