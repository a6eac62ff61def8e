# First device call (2026-11-27): the wheels of .whl (hydra-core, omegaconf, antlr4, jiwer, rapidfuzz,
# soundfile, cffi, pycparser), the checkout as .gpuck/clean.tar.gz, then the GPU check; results under $OUT.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
mkdir -p /tmp/w && tar xzf .gpuck/clean.tar.gz -C /tmp/w && cd /tmp/w || exit 4
export PYTHONPATH=/tmp/site:/tmp/w
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
python3 -c "import torch,hydra,soundfile,jiwer,lightning;print(torch.__version__,torch.backends.cudnn.version(),lightning.__version__,torch.cuda.get_device_name())" 2>&1 | tee $OUT/env.txt
pk(){ tar czf /tmp/gc.tgz --exclude=mirror --exclude=src --exclude=archives --exclude=checkpoints --exclude=tb -C /tmp gc 2>/dev/null && cp /tmp/gc.tgz $OUT/gc.tgz; cp /tmp/gc/summary.md /tmp/gc/summary.json $OUT/ 2>/dev/null; }
(while sleep 30; do pk; done) & L=$!
timeout 500 python3 scripts/gpu_check.py --out /tmp/gc > $OUT/log.txt 2>&1; echo "gpu_check exit $?" >> $OUT/log.txt
kill $L; wait $L 2>/dev/null; pk; tail -3 $OUT/log.txt; cat $OUT/summary.md
