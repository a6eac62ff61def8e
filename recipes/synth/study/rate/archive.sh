#!/bin/bash
# issue 45 point 3: archive the rate-ladder decodings of the seed-4 CTC runs (none, sinusoidal, RoPE,
# relative, CAPE) and of learned_wrap's seed 0 (its only checkpoint) into
# recipes/synth/study/rate/results.jsonl.xz and draw the reports from the archive (report.sh).
#
#   bash recipes/synth/study/rate/archive.sh <folder of the decoded runs>
#   TABLE=recipes/synth/study/rate/seed3 RUNS_ARCHIVED="rope_ctc_s3 ..." bash .../archive.sh <folder>
#
# TABLE: the study folder whose results.jsonl.xz takes the runs (default this one; retrain.sh archives
# seed 3 into seed3/, one table per seed keeps each file small).
# Stages each <runs>/<run> as run_info.json, config.yaml and, per rate-ladder set (eval/test,
# eval/test_tempo*, eval/test_hop*, eval/ladder_test_alone, eval/ladder_test_alone_tempo*), its
# buckets.csv, buckets.meta.json and per_utt.jsonl (no checkpoints, none of the runs' other sets);
# adds the staged folders to the table (python -m asr_pe.results_table add), then draws the reports
# of every archived run (report.sh).
set -euo pipefail
RUNS=${1:?usage: archive.sh <folder of the decoded runs>}
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
HERE=recipes/synth/study/rate
TABLE=${TABLE:-$HERE}
PY=${PY:-$REPO/.venv/bin/python}
# RUNS_ARCHIVED / REPORT from the environment: retrain.sh archives one run at a time, without the report
RUNS_ARCHIVED=${RUNS_ARCHIVED:-"none_ctc_s4 sinusoidal_ctc_s4 rope_ctc_s4 relative_ctc_s4 cape_ctc_s4 learned_wrap_ctc_s0"}
REPORT=${REPORT:-1}
cd "$REPO"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
for name in $RUNS_ARCHIVED; do
  run=$RUNS/$name
  dest=$STAGE/$name
  mkdir -p "$dest"
  cp "$run/run_info.json" "$run/config.yaml" "$dest/"
  for d in "$run"/eval/test "$run"/eval/test_tempo* "$run"/eval/test_hop* "$run"/eval/ladder_test_alone \
           "$run"/eval/ladder_test_alone_tempo*; do
    [ -d "$d" ] || continue
    mkdir -p "$dest/eval/$(basename "$d")"
    for f in buckets.csv buckets.meta.json per_utt.jsonl; do
      cp "$d/$f" "$dest/eval/$(basename "$d")/$f"
    done
  done
done
STAGED=$(for name in $RUNS_ARCHIVED; do echo "$STAGE/$name"; done)
"$PY" -m asr_pe.results_table add "$TABLE" $STAGED
"$PY" -m asr_pe.results_table check "$TABLE" $STAGED
[ "$REPORT" = 1 ] || exit 0
PY=$PY bash "$HERE/report.sh"
