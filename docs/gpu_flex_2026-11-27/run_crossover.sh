# Third call: where FlexAttention starts to win for ALiBi, T5 and Shaw (between T = 1000 and 4000 in
# the second call): the fused and flex paths at T = 1500, 2000, 3000, one bench process per path.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/pip.log 2>&1 || { tail -5 /tmp/pip.log; exit 3; }
mkdir -p /tmp/w && tar xzf .gpuck/clean.tar.gz -C /tmp/w && cd /tmp/w || exit 4
export PYTHONPATH=/tmp/site:/tmp/w
B="python3 scripts/bench_attention.py --device cuda --precision bf16 --pes none alibi t5 shaw --lengths 1500 2000 3000 --reps 5 --warmup 2 --mem-reps 1 --threads 4 --no-reference"
for path in fused flex; do
  timeout 150 $B --attention $path --out /tmp/$path > $OUT/$path.log 2>&1; echo "$path exit $?"
done
cat /tmp/fused/*.md /tmp/flex/*.md > $OUT/tables.md 2>/dev/null; grep "^| [a-z]" $OUT/tables.md
