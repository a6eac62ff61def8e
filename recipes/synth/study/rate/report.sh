#!/bin/bash
# issue 45 point 3: the rate study's reports, drawn from the archive alone (no run folders needed):
#
#   bash recipes/synth/study/rate/report.sh
#
#   report/<set>/rate_<axis>.{md,csv,png}         the runs of results.jsonl.xz (seed 4, learned's seed 0)
#   seed<N>/report/<set>/rate_<axis>.{md,csv,png} the runs of seed<N>/results.jsonl.xz (retrain.sh's)
#   report_pooled/<set>/rate_<axis>.{md,csv,png}  every archived run, each PE's seeds pooled (crossed CI:
#                                                 utterances, one draw shared by the seeds, then seeds)
# The three ladders of each: tempo and hop on `test`, tempo on `ladder_test_alone`.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
HERE=recipes/synth/study/rate
PY=${PY:-$REPO/.venv/bin/python}
cd "$REPO"
# every figure and table captioned with what the CAPE paper did (asr_pe/plots/cape_paper.py) and what
# stands in for it here
NOTE="Here: the embedded synthetic corpus (espeak-ng voices) in place of WSJ, a 6-layer 144-d Transformer, CTC."
draw() {  # <out> <run path>...
  local out=$1; shift
  local cap=(--paper-caption --note "$NOTE")
  "$PY" scripts/plot_rate_ladder.py "$@" --test-set test --axis tempo --out "$out/test" "${cap[@]}"
  "$PY" scripts/plot_rate_ladder.py "$@" --test-set test --axis hop_ms --out "$out/test" "${cap[@]}"
  "$PY" scripts/plot_rate_ladder.py "$@" --test-set ladder_test_alone --axis tempo --out "$out/ladder_test_alone" "${cap[@]}"
}
ordered() {  # a table's runs in the study's PE order (the reports' row order), then any other
  local all; all=$("$PY" -m asr_pe.results_table list "$1")
  for pe in none sinusoidal rope relative cape learned_wrap; do grep -E "/${pe}_ctc_s[0-9]+$" <<< "$all" || true; done
  grep -vE "/(none|sinusoidal|rope|relative|cape|learned_wrap)_ctc_s[0-9]+$" <<< "$all" || true
}
mapfile -t SEED4 < <(ordered "$HERE")
draw "$HERE/report" "${SEED4[@]}"
ALL=("${SEED4[@]}")
for table in "$HERE"/seed*/results.jsonl.xz; do
  [ -f "$table" ] || continue
  mapfile -t RUNS < <(ordered "$(dirname "$table")")
  draw "$(dirname "$table")/report" "${RUNS[@]}"
  ALL+=("${RUNS[@]}")
done
[ ${#ALL[@]} -gt ${#SEED4[@]} ] || exit 0
draw "$HERE/report_pooled" "${ALL[@]}"
