# FlexAttention on a lent GPU (issue 47 point 2), one device call: the wheels of .whl (hydra-core,
# omegaconf, antlr4, jiwer, rapidfuzz, soundfile, cffi, pycparser) onto the machine's torch, the commit
# as .gpuck/clean.tar.gz (git archive), then
# (1) the CUDA tests of the flex path (gradients against the reference path), (2) the training-step
# benchmark of the bias PEs with the fused paths and (3) with FlexAttention, same lengths, same machine.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1 || { tail -5 $OUT/pip.log; exit 3; }
mkdir -p /tmp/w && tar xzf .gpuck/clean.tar.gz -C /tmp/w && cd /tmp/w || exit 4  # the commit, not the work tree
export PYTHONPATH=/tmp/site:/tmp/w
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
python3 -c "import torch,lightning;print(torch.__version__,torch.backends.cudnn.version(),lightning.__version__,torch.cuda.get_device_name())" 2>&1 | tee $OUT/env.txt
B="python3 scripts/bench_attention.py --device cuda --precision bf16 --lengths 250 1000 4000 --reps 5 --warmup 2 --mem-reps 1 --threads 4 --no-reference"
timeout 120 python3 -m pytest tests/models/test_flex_attention.py -q -p no:cacheprovider -k cuda > $OUT/pytest_flex_cuda.txt 2>&1; echo "pytest exit $?" >> $OUT/pytest_flex_cuda.txt
grep -E "passed|failed|Error:" $OUT/pytest_flex_cuda.txt | tail -6
timeout 80 $B --pes none rope alibi t5 shaw relative --attention fused --out $OUT/fused > $OUT/fused.log 2>&1; echo "fused exit $?"
# one process per bias PE (with none, for its ratio): a PE whose kernel fails to compile leaves the others
for pe in t5 alibi shaw relative; do
  timeout 100 $B --pes none $pe --attention flex --out $OUT/flex_$pe > $OUT/flex_$pe.log 2>&1; echo "flex $pe exit $?"
  grep "Error:" $OUT/flex_$pe.log | tail -2
done
cat $OUT/fused/*.md $OUT/flex_*/*.md 2>/dev/null | grep "^| [a-z]"
