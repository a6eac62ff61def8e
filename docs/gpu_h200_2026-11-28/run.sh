# The device call of 2026-11-28 (issue 47 point 4 on the current code): the wheels of .whl (hydra-core,
# omegaconf, antlr4, jiwer, rapidfuzz, soundfile, cffi, pycparser, python-stretch, espeakng-loader) onto
# the machine's torch, then (1) the one-call GPU check, `python3 scripts/gpu_check.py --out /tmp/gc`,
# (2) the tests that have a CUDA part, on CUDA. Everything under $OUT (8 files at most come back).
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
python3 -c "import torch,hydra,soundfile,jiwer,lightning,python_stretch;print(torch.__version__,torch.backends.cudnn.version(),lightning.__version__,torch.cuda.get_device_name())" > $OUT/env.txt 2>&1; cat $OUT/env.txt
pk(){ tar czf /tmp/gc.tgz --exclude=mirror --exclude=src --exclude=archives --exclude=checkpoints --exclude=tb -C /tmp gc 2>/dev/null && cp /tmp/gc.tgz $OUT/gc.tgz; cp /tmp/gc/summary.md /tmp/gc/summary.json $OUT/ 2>/dev/null; }
(while sleep 30; do pk; done) & L=$!
timeout 490 python3 scripts/gpu_check.py --out /tmp/gc > /tmp/gc_log.txt 2>&1; echo "gpu_check exit $?" >> /tmp/gc_log.txt
kill $L; wait $L 2>/dev/null; pk
timeout 70 python3 -m pytest -q -p no:cacheprovider -rs tests/models/test_sdpa_backend_choice.py tests/models/test_shaw_layout_choice.py tests/models/test_flex_attention.py tests/inference/test_fast_paths.py > /tmp/pytest_cuda.txt 2>&1; echo "pytest exit $?" >> /tmp/pytest_cuda.txt
cat /tmp/gc_log.txt /tmp/pytest_cuda.txt > $OUT/log.txt
tail -4 /tmp/gc_log.txt; tail -8 /tmp/pytest_cuda.txt; cat $OUT/summary.md
