# Second device call of 2026-11-28: the Shaw layout test in float64 on CUDA (the first call's fp32
# version was 1.3e-4 apart on one table-gradient entry), and the fused bench step under its new limit.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/pip.log 2>&1 || { tail -5 /tmp/pip.log; exit 3; }
export PYTHONPATH=/tmp/site:$PWD
timeout 40 python3 -m pytest -q -p no:cacheprovider -rs tests/models/test_shaw_layout_choice.py > $OUT/pytest_shaw.txt 2>&1; echo "pytest exit $?" >> $OUT/pytest_shaw.txt; tail -3 $OUT/pytest_shaw.txt
timeout 120 python3 scripts/gpu_check.py --out /tmp/gc2 --steps bench_fused > $OUT/log2.txt 2>&1; echo "gpu_check exit $?" >> $OUT/log2.txt
cp /tmp/gc2/summary.md $OUT/summary2.md; cp /tmp/gc2/bench_fused/*.md $OUT/ 2>/dev/null; tail -3 $OUT/log2.txt; grep -A10 "^| step" $OUT/summary2.md | head -5
