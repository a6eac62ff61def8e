#!/usr/bin/env bash
# Issue 45 point 3: more seeds on the rate axis. By default seed 3 of RoPE, relative, sinusoidal,
# none and CAPE, and seed 1 of learned (`learned_wrap`), retrained deterministically (the study's
# runs kept no checkpoint), compared with their archived runs (seeds 2-4: recipes/synth/study/seeds/,
# seeds 0-1: recipes/synth/study/runs/), and decoded on the rate ladders as seed 4 was (README.md
# "Commands"): tempo and feature hop on `test`, tempo on the length ladder's test pool decoded alone.
# Resumable, one run per process; each run is archived into seed<N>/results.jsonl.xz (one table per
# seed keeps each file small; its line of retrained.jsonl here) and committed as it finishes; then
# report.sh draws the reports and claims_rate.py checks the README against them.
#
#   recipes/synth/study/rate/retrain.sh --train_code DIR [--runs "PE:SEED ..."] [--work_dir DIR]
#                                       [--commit_repo DIR] [--nice N]
#
#   --train_code   a worktree of the commit whose training reproduces the archived runs
#                  (ec2787b: training since da33d49 draws other SpecAugment masks; see ../backlog.sh);
#                  the decoding is this checkout's (scripts/evaluate_rates.py)
#   --runs         the runs, in order (default "rope:3 relative:3 sinusoidal:3 none:3 cape:3 learned_wrap:1")
#   --work_dir     run folders and logs (not in git; default ~/asr_pe_rate_retrain)
#   --commit_repo  the checkout the archive is committed in (default: this one)
# Needs the study corpus and ladder in the cache (../backlog.sh --stage 0). Cost (1 thread, 2 shared
# cores): training 15-20 min, the three rate ladders ~30-40 min per run.
set -euo pipefail
{
train_code="" work_dir=$HOME/asr_pe_rate_retrain commit_repo="" niceness=10
runs="rope:3 relative:3 sinusoidal:3 none:3 cape:3 learned_wrap:1"
while [ $# -gt 0 ]; do
  case "$1" in
    --train_code|--train-code) train_code=$2; shift 2 ;;
    --work_dir|--work-dir) work_dir=$2; shift 2 ;;
    --commit_repo|--commit-repo) commit_repo=$2; shift 2 ;;
    --nice) niceness=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) echo "error: unknown option $1; see $0 --help" >&2; exit 2 ;;
  esac
done
for pe_seed in $runs; do  # the whole list read before anything runs
  [[ "$pe_seed" =~ ^[a-z0-9_]+:[0-9]+$ ]] || { echo "error: --runs: $pe_seed is not PE:SEED" >&2; exit 2; }
done
[ -n "$train_code" ] && [ -f "$train_code/train.py" ] || { echo "error: --train_code <worktree> is required (see --help)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$repo"
source "$repo/recipes/python.sh"   # $PYTHON, and this checkout first on PYTHONPATH
train_code=$(cd "$train_code" && pwd)
commit_repo=$(cd "${commit_repo:-$repo}" && pwd)
mkdir -p "$work_dir/runs" "$work_dir/logs"
work_dir=$(cd "$work_dir" && pwd)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
here=recipes/synth/study/rate
ladder_test=${ASR_PE_CACHE:-$HOME/.cache/asr_pe}/synth_ladder/3b1c23b1774d/ladder_test_alone.jsonl
[ -f "$ladder_test" ] || { echo "error: $ladder_test missing: run recipes/synth/study/backlog.sh --stage 0 first" >&2; exit 1; }
log() { echo "[$(date -u '+%F %H:%M:%S')] $*"; }
log "rate retrain: training code $train_code ($(git -C "$train_code" rev-parse --short HEAD)), decoding $repo ($(git -C "$repo" rev-parse --short HEAD)), commits to $commit_repo"
for pe_seed in $runs; do  # RoPE first: its checkpoint also gives the attention statistics a second seed
  pe=${pe_seed%%:*} seed=${pe_seed##*:}
  run=${pe}_ctc_s$seed rundir=$work_dir/runs/${pe}_ctc_s$seed runlog=$work_dir/logs/${pe}_ctc_s$seed.log
  table=$here/seed$seed
  study=recipes/synth/study/seeds; [ "$seed" -ge 2 ] || study=recipes/synth/study/runs  # where the study archived it
  if [ -f "$commit_repo/$table/results.jsonl.xz" ] && "$PYTHON" -c "import sys; from asr_pe.results_table import runs_in
sys.exit(0 if sys.argv[1] in runs_in(sys.argv[2]) else 1)" "$run" "$commit_repo/$table"; then
    log "  $run: archived, skipped"; continue
  fi
  if [ ! -f "$rundir/eval/done.json" ]; then
    log "  $run: training (log $runlog)"
    (cd "$train_code" && PYTHONPATH=$train_code nice -n "$niceness" "$PYTHON" train.py -m experiment=synth_study \
        hydra.sweep.dir="$work_dir/runs" pe="$pe" seed="$seed") >> "$runlog" 2>&1
  fi
  if [ "$commit_repo" != "$repo" ]; then  # the archive as the commit checkout has it (earlier runs of this script)
    for f in $table/results.jsonl.xz $here/retrained.jsonl; do [ ! -f "$commit_repo/$f" ] || { mkdir -p "$repo/$(dirname $f)"; cp "$commit_repo/$f" "$repo/$f"; }; done
  fi
  rep=$(nice -n "$niceness" "$PYTHON" recipes/synth/study/backlog.py reproduce "$rundir" --study "$study" \
        --out "$repo/$here/retrained.jsonl")
  log "  $run: $rep"
  for axis in tempo hop_ms; do
    log "  $run: $axis ladder of test"
    nice -n "$niceness" "$PYTHON" scripts/evaluate_rates.py run="$rundir" axis=$axis data.test=test threads=1 >> "$runlog" 2>&1
  done
  log "  $run: tempo ladder of the ladder's test pool decoded alone"
  nice -n "$niceness" "$PYTHON" scripts/evaluate_rates.py run="$rundir" axis=tempo \
      "data.test={ladder_test_alone:$ladder_test}" threads=1 >> "$runlog" 2>&1
  TABLE=$table RUNS_ARCHIVED=$run REPORT=0 PY=$PYTHON bash "$here/archive.sh" "$work_dir/runs"
  paths=("$table/results.jsonl.xz" "$here/retrained.jsonl")
  if [ "$commit_repo" != "$repo" ]; then for p in "${paths[@]}"; do mkdir -p "$commit_repo/$(dirname $p)"; cp "$repo/$p" "$commit_repo/$p"; done; fi
  git -C "$commit_repo" add -- "${paths[@]}"
  git -C "$commit_repo" commit -q --only -m "issue 45 point 3: the rate axis, $run retrained and decoded on the rate ladders (reproduced: $(grep -o '"reproduced": [a-z]*' <<< "$rep" | cut -d' ' -f2))" -- "${paths[@]}"
  log "  $run: committed $(git -C "$commit_repo" log -1 --format=%h)"
done
log "rate retrain: done"
}
