#!/usr/bin/env bash
# The ladder backlog of issue 48 (points 5 and 6), staged and resumable (icefall style), one run
# per process, each run archived and committed as it finishes:
#   stage 0: the study corpus (7500 training utterances, 160 s long-form set) and the length
#            ladder, built in the cache, then checked against the archive: folder hashes
#            (corpus 21b0b5c080e1, ladder 3b1c23b1774d), the ladder's composition byte for byte
#            (study/ladder/ladder_composition.jsonl.xz), the long-form parts (study/longform/parts.json)
#   stage 1: point 5, seed 4 of none, sinusoidal, rope, relative, cape on the ladder, each offered
#            what seeds 2 and 3 were offered on the dev ladder (window:2.5; sinusoidal also window:5)
#            -> study/ladder/seed4/
#   stage 2: point 6, the seven PEs never on the ladder (shaw, t5, alibi, rem, conv, learned_wrap,
#            sinusoidal_sqrtd), seeds 0 and 1 (seed-major), each offered window:2.5, window:5,
#            window:10, logit_scale and chunked:20:4 on the dev ladder -> study/ladder/more_pes/ (seed 1: more_pes/seed1/)
#   stage 3: issue 45 point 4, what each part of CAPE does: CAPE with its global shift only, its global
#            scaling only, its local shift only, and with the paper's 60 s shift (the study's is 30 s),
#            seeds 4 and 3, each on the length ladder (window:2.5 offered on dev) and on the tempo ladder
#            of the ladder's test pool decoded alone -> study/cape_parts/<arm>/ (new runs: no archive to
#            reproduce; the study's cape, none and sinusoidal runs of those seeds are the comparison)
#   stage 4: issue 44 point 5, the transducer arm: loss=transducer with none, sinusoidal, rope,
#            relative, cape, seeds 2 and 3, the CTC study's encoder and budget, on the ladder as stage 1
#            -> study/transducer/
#   stage 5: issue 48 point 7, the arms' attention with CIs: the arms' runs trained again (arm 3, the
#            70 ms front end: relative, none, sinusoidal, CAPE, seeds 0, 1; arm 1, the Conformer: the
#            five PEs, seeds 0, 1; arm 3 at 3x the steps: none, sinusoidal, CAPE, seeds 0-2), each
#            compared with its archive (study/arms/<arm>/), then its attention measured on the
#            ladder's test pool as study/attention/ measures it (scripts/attention_vs_length.py,
#            per_bucket=50, the 0.5 s-gap rungs and the single utterances, with the commit
#            checkout's code) -> study/attention/arms/<arm>/ (the run's own test and long-form
#            decodings and attention_stats/ in the table; no ladder decoding)
#   stage 6: issue 45 point 4, CAPE's parts on the hop ladder: each arm of stage 3 (seeds 4, 3) trained
#            again with stage 3's command, compared with its archive (study/cape_parts/<arm>/), and
#            decoded on the hop ladder of `test` (feature hops 8, 9, 11, 12 ms; 10 ms is `test`), as
#            study/rate/ decoded the baselines -> study/cape_parts/hop/<arm>/ (the run's own test and
#            long-form decodings and the hop sets; no length ladder); a folder of its own, so that
#            cape_parts/<arm>/, which its README quotes, stays what it quotes
#   stage 7: issue 48 point 4, the RoPE controls at the length tested -> study/finetune160/: per seed 2, 3, 4,
#            the source (rope_ctc_s<seed> trained by the study's recipe, as source_rope_ctc_s<seed>), the
#            fine-tunes on training utterances joined to <= 160 s (experiment=synth_finetune160): plain RoPE,
#            PI and YaRN at s = 32 (160 s / 5 s), the continuation control on the study's short utterances,
#            and the yardstick trained from scratch on inputs joined to <= 160 s (synth_yardstick160).
#            Seed 2 chooses every setting on the dev ladder's two 160 s rungs (CER pooled over
#            ladder_dev_gap500ms_160 and ladder_dev_nogap_160): each method's lr (3e-4, 1e-3) and steps
#            (100, 300), YaRN's beta (10, 32), and the window (±2.5 s, ±5 s) of the source and of the
#            continuation control, which are decoded with it; seeds 3 and 4 train the settings seed 2
#            chose. Every chosen model (and the yardstick) is decoded on test and the long-form set
#            (the in-context ratio). Each run is archived and committed when done (a grid run with its
#            dev sets, again with its test sets once chosen); the choices as reports/choice_<method>_s2.json.
#            Each source's weights are archived once trained (sources/<run>/, 7 MB: backlog.py
#            export-source), and a later session fine-tunes those instead of training the source again,
#            which gives the same weights only on the machine type it was trained on (seed 3, 2026-12-04:
#            its Xeon-trained fine-tunes were dropped on 2026-12-05 and trained again from the EPYC source).
#            Seed 2 predates that: its source is trained again, and the lane stops when a source
#            is not the one the archived fine-tunes of it name (run_info's init_from.weights_sha256, or
#            .sha256 in older records) or the one archived (backlog.py same-source).
#   Stages 3-4 and 6 need code later than the ladder's (evaluate_rates.py, the transducer): run them from a
#   worktree of such a commit, one commit for all the runs of a stage.
#   Training since da33d49 (2026-11-27: SpecAugment's masks from a seed per item, the steps' random
#   state carried across resumes) draws other masks than the archived runs were trained with: step 2
#   can say "reproduced": true only from a worktree of a commit before it (the lanes run from
#   ec2787b and 9c9013f).
# Per run (<pe>_ctc_s<seed>): skipped when <commit_repo>/<dest> already archives it (results.jsonl.xz
# and reports/<run>.{md,choice.json}); else
#   1. train it again, deterministically (train.py -m experiment=synth_study pe=<pe> seed=<seed>, the
#      archived run's config, 1 thread: the thread count the archived runs were trained with); no
#      checkpoint is kept between sessions, so a run interrupted by the end of a session restarts;
#   2. compare its test and long-form decodings with the archived run of the same name (study/seeds/
#      for seed 4, study/runs/ for seeds 0, 1): per utterance, and the best checkpoint's step; the
#      result is a line of <dest>/retrained.jsonl ("reproduced": true when every hypothesis matches; "machine":
#      the CPU and instruction set it ran on);
#   3. scripts/evaluate_ladder.py with the candidates above (choice on the dev pool, test once);
#   4. archive: python -m asr_pe.results_table add <dest> <run view> --remedy-utts (the ladder sets,
#      per-utterance scores for the test pool only, as study/ladder/ keeps them, and the run's own
#      test and long-form decodings), the report and the choice as <dest>/reports/<run>.{md,choice.json};
#   5. copy those files into --commit_repo (default: this checkout) and commit only them there, once that
#      checkout's tests/test_results_table.py passes on them (else they are taken back and the lane stops).
# A failed training or decoding skips to the next run; a failure in 4-5 stops the lane (the next run
# would copy the commit checkout's table over the uncommitted one); the same command retries it.
# The new runs go to their own folders (seed4/, more_pes/) so that the committed tables of
# study/ladder/ (seeds 2, 3), which RESULTS.md and the READMEs quote, stay what they quote until a
# folder is complete.
#
# Usage: recipes/synth/study/backlog.sh [--stage 0] [--stop_stage 7] [--work_dir DIR] [--commit_repo DIR]
#                                      [--threads 1] [--nice 10] [--arms frontend70,conformer,frontend70_long]
#                                      [--pes none,sinusoidal,rope,relative,cape] [--seeds 1] [--ft_seeds 2,3,4]
#                                      [--ft_parts controls,yardstick] [--ft_models source,rope,rope_pi,...]
#   --work_dir     run folders, logs and staged archives (not in git; default ~/asr_pe_backlog)
#   --arms         stage 5's arms, in this order (two lanes can share the stage: one arm each)
#   --seeds        stage 5's seeds, in this order (default: each arm's own; two lanes can share an arm: one
#                  set of seeds each)
#   --ft_seeds     stage 7's seeds, in this order (2 first: it makes the dev choices the others use)
#   --ft_parts     stage 7's parts: the source and its fine-tunes (controls), the yardstick trained from
#                  scratch (yardstick), or both; two lanes can share a seed, one part each
#   --ft_models    the controls' models this lane trains and decodes (default all: source, rope, rope_pi,
#                  rope_yarn_b10, rope_yarn_b32, rope_shortft); two lanes can share a seed's fine-tunes,
#                  one set of models each (each fine-tunes the source's archived weights, sources/)
#   --pes          stage 4's PEs, in this order (two lanes can share the stage: one set of PEs each;
#                  lanes take turns to archive, each on top of what the others committed)
#   --commit_repo  the git checkout the archives are copied to and committed in (default: this one)
# Cost (2 shared CPU cores, 1 thread): training 15-20 min, the plain ladder ~25 min, each dev
# candidate ~8 min, the chosen setting on test ~10 min: ~1 h per run in stage 1, ~1.5 h in stage 2
# (Shaw seed 0, 2026-11-27: training 37 min).
set -euo pipefail
# One { ... } block, read whole before it runs: editing this file mid-run cannot change the running copy.
{
stage=0
stop_stage=7
work_dir=$HOME/asr_pe_backlog
commit_repo=""
threads=1
niceness=10
arms=frontend70,conformer,frontend70_long
transducer_pes=none,sinusoidal,rope,relative,cape
arm_seeds=""
ft_seeds="2 3 4"
ft_parts=controls,yardstick
ft_models=source,rope,rope_pi,rope_yarn_b10,rope_yarn_b32,rope_shortft
while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage=$2; shift 2 ;;
    --stop_stage|--stop-stage) stop_stage=$2; shift 2 ;;
    --work_dir|--work-dir) work_dir=$2; shift 2 ;;
    --commit_repo|--commit-repo) commit_repo=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --nice) niceness=$2; shift 2 ;;
    --arms) arms=$2; shift 2 ;;
    --pes) transducer_pes=$2; shift 2 ;;
    --seeds) arm_seeds=${2//,/ }; shift 2 ;;
    --ft_seeds|--ft-seeds) ft_seeds=${2//,/ }; shift 2 ;;
    --ft_parts|--ft-parts) ft_parts=$2; shift 2 ;;
    --ft_models|--ft-models) ft_models=$2; shift 2 ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) echo "error: unknown option $1; see $0 --help" >&2; exit 2 ;;
  esac
done

repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo"
source "$repo/recipes/python.sh"   # $PYTHON, and this checkout first on PYTHONPATH
commit_repo=$(cd "${commit_repo:-$repo}" && pwd)
mkdir -p "$work_dir/logs" "$work_dir/runs" "$work_dir/archive"
work_dir=$(cd "$work_dir" && pwd)
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
run_py() { nice -n "$niceness" "$PYTHON" "$@"; }
log() { echo "[$(date -u '+%F %H:%M:%S')] $*"; }
# a failure once a run's rows are in this checkout's table, not yet committed: the lane stops, since the
# next run would copy the commit checkout's table over it (sync_dest); the same command retries the run
stop_lane() {
  log "  $1; stopped: $2 holds $3's rows uncommitted; run the same command again to archive it"; exit 1
}
# stage 5's arms: arm_runs ARM sets its seeds and PEs; --arms is checked before any stage runs
arm_runs() {
  case "$1" in
    frontend70) seeds="0 1" pes="relative none sinusoidal cape" ;;
    conformer) seeds="0 1" pes="none sinusoidal rope relative cape" ;;
    frontend70_long) seeds="0 1 2" pes="none sinusoidal cape" ;;
    *) log "error: --arms: no arm $1 (frontend70, conformer, frontend70_long)"; exit 2 ;;
  esac
  local seed
  for seed in $arm_seeds; do
    [[ " $seeds " == *" $seed "* ]] || { log "error: --seeds: arm $1 has seeds $seeds, not $seed"; exit 2; }
  done
  seeds=${arm_seeds:-$seeds}
}
IFS=, read -r -a arm_list <<< "$arms"
for arm in "${arm_list[@]}"; do arm_runs "$arm"; done
IFS=, read -r -a transducer_pe_list <<< "$transducer_pes"
for pe in "${transducer_pe_list[@]}"; do
  case "$pe" in none|sinusoidal|rope|relative|cape) ;;
    *) log "error: --pes: no PE $pe in the transducer arm (none, sinusoidal, rope, relative, cape)"; exit 2 ;;
  esac
done
for seed in $ft_seeds; do
  case "$seed" in 2|3|4) ;; *) log "error: --ft_seeds: stage 7 has seeds 2, 3, 4, not $seed"; exit 2 ;; esac
done
IFS=, read -r -a ft_part_list <<< "$ft_parts"
[ "${#ft_part_list[@]}" -gt 0 ] || { log "error: --ft_parts: none given (controls, yardstick)"; exit 2; }
for part in "${ft_part_list[@]}"; do
  case "$part" in controls|yardstick) ;; *) log "error: --ft_parts: no part $part (controls, yardstick)"; exit 2 ;; esac
done
IFS=, read -r -a ft_model_list <<< "$ft_models"
[ "${#ft_model_list[@]}" -gt 0 ] || { log "error: --ft_models: none given"; exit 2; }
for model in "${ft_model_list[@]}"; do
  case "$model" in source|rope|rope_pi|rope_yarn_b10|rope_yarn_b32|rope_shortft) ;;
    *) log "error: --ft_models: no model $model (source, rope, rope_pi, rope_yarn_b10, rope_yarn_b32, rope_shortft)"; exit 2 ;;
  esac
done
log "backlog: code $repo ($(git -C "$repo" rev-parse --short HEAD)), commits to $commit_repo, work in $work_dir"
log "  python $PYTHON: $("$PYTHON" -c 'import asr_pe; print(asr_pe.__file__)')"

cache=${ASR_PE_CACHE:-$HOME/.cache/asr_pe}
corpus_dir=$cache/synth/21b0b5c080e1
ladder_dir=$cache/synth_ladder/3b1c23b1774d
inputs_ok=$work_dir/inputs_checked

if [ "$stage" -le 0 ] && [ "$stop_stage" -ge 0 ]; then
  log "stage 0: study corpus, ladder, checks"
  run_py -m asr_pe.data.synth --longform 160 --num-train 7500 --workers "$threads" --no-progress
  run_py -m asr_pe.data.synth.ladder --workers "$threads" --no-progress
  if run_py recipes/synth/study/backlog.py check-inputs --ladder "$ladder_dir" --corpus "$corpus_dir"; then
    date -u '+%F %T' > "$inputs_ok"
  else
    log "stage 0: the built inputs differ from the archived ones; nothing is trained on them"; exit 1
  fi
fi

# lanes that archive into one commit checkout take turns (fd 8, released by `flock -u 8` or the lane's
# exit): the lock lives in the checkout's common git folder, which its worktrees share
take_archive_turn() {
  exec 8> "$(cd "$commit_repo" && cd "$(git rev-parse --git-common-dir)" && pwd)/asr_pe-backlog-archive.lock"
  flock 8
}

# the commit checkout's archive tests (tests/test_results_table.py: every committed table read back, each
# study's per-utterance files where its rule keeps them; tests/recipes/test_backlog.py, which reads the
# archived finetune160 table) on the files about to be committed, with that checkout's code: what CI runs.
# A table they fail is not committed (a lane's commit turned CI red on 2026-12-02, and on 2026-12-03 one
# that only test_backlog.py read).
check_archive() {
  [ -f "$commit_repo/tests/test_results_table.py" ] || return 0
  local -a tests=(tests/test_results_table.py)
  [ -f "$commit_repo/tests/recipes/test_backlog.py" ] && tests+=(tests/recipes/test_backlog.py)
  (cd "$commit_repo" && PYTHONPATH="$commit_repo" run_py -m pytest -q -x -p no:cacheprovider \
     "${tests[@]}") > "$work_dir/logs/archive_check.log" 2>&1
}

# copy the files of <dest> this run changes into the commit checkout and commit only them, once
# check_archive passes there; else the copies are taken back (the commit checkout as it was) and 1
commit_paths() {  # message, paths relative to the repository
  local msg=$1; shift
  local p i
  if [ "$commit_repo" != "$repo" ]; then
    for p in "$@"; do mkdir -p "$(dirname "$commit_repo/$p")"; cp "$repo/$p" "$commit_repo/$p"; done
  fi
  if ! check_archive; then
    log "  ARCHIVE CHECK FAILED in $commit_repo (tests/test_results_table.py; $work_dir/logs/archive_check.log): not committed"
    if [ "$commit_repo" != "$repo" ]; then
      for p in "$@"; do
        if git -C "$commit_repo" cat-file -e "HEAD:$p" 2>/dev/null; then git -C "$commit_repo" checkout -q HEAD -- "$p"
        else rm -f "$commit_repo/$p"; fi
      done
    fi
    return 1
  fi
  for i in $(seq 1 120); do
    if [ -e "$(git -C "$commit_repo" rev-parse --git-dir)/index.lock" ]; then sleep 5; continue; fi
    if git -C "$commit_repo" add -- "$@" && git -C "$commit_repo" commit -q --only -m "$msg" -- "$@"; then
      log "  committed in $commit_repo: $(git -C "$commit_repo" log -1 --format='%h %s' | cut -c1-150)"
      return 0
    fi
    sleep 5
  done
  log "  COMMIT FAILED in $commit_repo for $*"; return 1
}

# the archive files of <dest> as the commit checkout has them (another run of this lane may have
# added to them since this checkout was made)
sync_dest() {
  if [ "$commit_repo" != "$repo" ] && [ -d "$commit_repo/$1" ]; then
    mkdir -p "$repo/$1"; cp -r "$commit_repo/$1/." "$repo/$1/"
  fi
}

# archive_run RUNDIR ARCHIVE DEST: the run staged as ARCHIVE/<run> (what the archive keeps of it), added to
# this checkout's DEST table with every set's per-utterance scores (--remedy-utts: whatever the checkout's
# table code makes of a buckets.meta.json; ec2787b's read an empty "remedy" as a remedy's results) and
# checked against the folder. The caller holds the archive turn, from its sync_dest to its commit.
archive_run() {
  local rundir=$1 archive=$2 dest=$3 run
  run=$(basename "$rundir")
  run_py recipes/synth/study/backlog.py stage "$rundir" "$archive" > /dev/null \
    && run_py -m asr_pe.results_table add "$repo/$dest" "$archive/$run" --remedy-utts \
    && run_py -m asr_pe.results_table check "$repo/$dest" "$archive/$run"
}

# retrain_archive TAG RUNDIR STUDY ARCHIVE DEST (stages 5 and 6): takes the archive turn (the caller's commit
# gives it back, `flock -u 8`, or the lane's exit), syncs DEST, compares the run with its archived namesake in
# STUDY (a line of DEST/retrained.jsonl; sets $reproduced) and archives it (archive_run)
retrain_archive() {
  local tag=$1 rundir=$2 study=$3 archive=$4 dest=$5 rep
  take_archive_turn
  sync_dest "$dest"
  mkdir -p "$repo/$dest"
  rep=$(run_py recipes/synth/study/backlog.py reproduce "$rundir" --study "$study" --out "$repo/$dest/retrained.jsonl") \
    || { log "  $tag: reproduction check FAILED"; flock -u 8; return 1; }
  log "  $tag: reproduction of ${study#"$commit_repo/"}/$(basename "$rundir"): $rep"
  reproduced=$(grep -o '"reproduced": [a-z]*' <<< "$rep" | cut -d' ' -f2)
  archive_run "$rundir" "$archive" "$dest" || stop_lane "$tag: archiving FAILED" "$repo/$dest" "$(basename "$rundir")"
}

one_run() {  # what pe seed dest origin candidates [loss [arm [rate_axis [override...]]]]
  # what: the commit message's issue and point; origin: the archive a retrain is compared with (empty:
  # a new run, nothing to compare); loss: ctc unless given; arm: a study arm (run folder runs/<arm>/,
  # run_info's arm); rate_axis: tempo | hop_ms, the rate ladder of the ladder's test pool decoded
  # alone (after the length ladder); overrides: Hydra overrides of the arm
  local what=$1 pe=$2 seed=$3 dest=$4 origin=$5 cands=$6 loss=${7:-ctc} arm=${8:-} rate=${9:-}
  shift $(( $# < 9 ? $# : 9 ))
  local -a overrides=("$@")
  [ "$loss" = ctc ] || overrides+=("loss=$loss")
  [ -z "$arm" ] || overrides+=("arm=$arm")
  local run=${pe}_${loss}_s${seed} runs_dir=$work_dir/runs${arm:+/$arm}
  local rundir=$runs_dir/$run runlog=$work_dir/logs/${arm:+$arm-}$run.log
  if run_py recipes/synth/study/backlog.py archived "$commit_repo/$dest" "$run"; then
    log "  ${arm:+$arm/}$run: archived in $dest, skipped"; return 0
  fi
  sync_dest "$dest"
  if [ ! -f "$rundir/eval/done.json" ]; then
    log "  ${arm:+$arm/}$run: training (log $runlog)"
    run_py train.py -m experiment=synth_study hydra.sweep.dir="$runs_dir" pe="$pe" seed="$seed" "${overrides[@]}" \
      >> "$runlog" 2>&1 || { log "  $run: training FAILED (see $runlog)"; return 1; }
  fi
  [ -f "$rundir/eval/done.json" ] || { log "  $run: no eval/done.json after training (see $runlog)"; return 1; }
  local rep="" reproduced=new
  local -a paths=("$dest/results.jsonl.xz" "$dest/reports/$run.md" "$dest/reports/$run.choice.json")
  mkdir -p "$repo/$dest"
  log "  $run: ladder, candidates [$cands] (log $runlog)"
  run_py scripts/evaluate_ladder.py run="$rundir" ladder="$ladder_dir" device=cpu "candidates=[$cands]" \
    >> "$runlog" 2>&1 || { log "  $run: evaluate_ladder FAILED (see $runlog)"; return 1; }
  if [ -n "$rate" ]; then
    log "  $run: the $rate ladder of the test pool decoded alone (log $runlog)"
    run_py scripts/evaluate_rates.py run="$rundir" axis="$rate" device=cpu \
      "data.test=[$ladder_dir/ladder_test_alone.jsonl]" >> "$runlog" 2>&1 \
      || { log "  $run: evaluate_rates FAILED (see $runlog)"; return 1; }
  fi
  # Lanes that share <dest> take turns from here to the commit: each adds its run to the files the
  # others committed (sync_dest again: they may have archived since this run started). The lock is
  # the commit checkout's, released at the commit or when the lane exits.
  take_archive_turn
  sync_dest "$dest"
  if [ -n "$origin" ]; then
    rep=$(run_py recipes/synth/study/backlog.py reproduce "$rundir" --study "$origin" --out "$repo/$dest/retrained.jsonl") \
      || { log "  $run: reproduction check FAILED"; flock -u 8; return 1; }
    log "  $run: reproduction of $origin/$run: $rep"
    reproduced=$(grep -o '"reproduced": [a-z]*' <<< "$rep" | cut -d' ' -f2)
    paths+=("$dest/retrained.jsonl")
  fi
  # (set -e does not act inside a function called with ||: every step checks its own status)
  archive_run "$rundir" "$work_dir/archive${arm:+/$arm}" "$dest" \
    && run_py recipes/synth/study/backlog.py reports "$rundir" "$repo/$dest/reports" \
    || stop_lane "$run: archiving FAILED" "$repo/$dest" "$run"
  local line
  line=$(run_py recipes/synth/study/backlog.py summary "$repo/$dest" "$run") \
    || stop_lane "$run: summary FAILED" "$repo/$dest" "$run"
  log "  $line"
  if [ -n "$origin" ]; then
    line="$what: ladder, $run retrained (archived run reproduced: $reproduced); $line"
  else
    line="$what: ${arm:+$arm, }$run trained, on the ladder${rate:+ and the $rate ladder}; $line"
  fi
  commit_paths "$line" "${paths[@]}" || stop_lane "$run: commit FAILED" "$repo/$dest" "$run"
  flock -u 8
}

# needs_code WHAT FILE: the stage's code (FILE, a module or script) is in this checkout; else one line
# saying to run the stage from a checkout that has it (a lane keeps one code version per study)
needs_code() {
  [ -e "$repo/$2" ] && return 0
  log "  $1 needs $2, which this checkout ($(git -C "$repo" rev-parse --short HEAD)) lacks: run this stage from a"
  log "  worktree of a later commit (git -C $commit_repo worktree add <dir> <commit>), one commit for all its runs"
  return 1
}

check_inputs() {
  [ -f "$inputs_ok" ] || { log "error: run stage 0 first (the corpus and ladder, checked against the archive)"; exit 1; }
}

failed=0
if [ "$stage" -le 1 ] && [ "$stop_stage" -ge 1 ]; then
  check_inputs
  log "stage 1: seed 4 of the five PEs on the ladder -> recipes/synth/study/ladder/seed4"
  for pe in none sinusoidal rope relative cape; do
    cands="window:2.5"; [ "$pe" = sinusoidal ] && cands="window:2.5,window:5"
    one_run "issue 48 point 5" "$pe" 4 recipes/synth/study/ladder/seed4 recipes/synth/study/seeds "$cands" || failed=1
  done
fi

if [ "$stage" -le 2 ] && [ "$stop_stage" -ge 2 ]; then
  check_inputs
  log "stage 2: seven more PEs on the ladder, seeds 0, 1 -> recipes/synth/study/ladder/more_pes (seed 1: its seed1/)"
  for seed in 0 1; do
    dest=recipes/synth/study/ladder/more_pes; [ "$seed" = 1 ] && dest=$dest/seed1   # one table each, < 2 MB
    for pe in shaw t5 alibi rem conv learned_wrap sinusoidal_sqrtd; do
      one_run "issue 48 point 6" "$pe" "$seed" "$dest" recipes/synth/study/runs \
        "window:2.5,window:5,window:10,logit_scale,chunked:20:4" || failed=1
    done
  done
fi
# what each part of CAPE does: one augmentation at a time, and the paper's 60 s shift against the
# study's 30 s (all three at 30 s are the study's cape runs, seeds 0-4)
cape_arms="cape_shift_only cape_scale_only cape_local_only cape_shift60"   # stages 3 and 6, in this order
cape_arm() {  # arm -> its Hydra overrides
  case "$1" in
    cape_shift_only) echo "pe.input.max_local_shift=0 pe.input.max_global_scaling=1" ;;
    cape_scale_only) echo "pe.input.max_global_shift=0 pe.input.max_local_shift=0" ;;
    cape_local_only) echo "pe.input.max_global_shift=0 pe.input.max_global_scaling=1" ;;
    cape_shift60) echo "pe.input.max_global_shift=60" ;;
  esac
}
if [ "$stage" -le 3 ] && [ "$stop_stage" -ge 3 ]; then
  check_inputs
  log "stage 3: CAPE's parts (issue 45 point 4), seeds 4, 3 -> recipes/synth/study/cape_parts/<arm>"
  if needs_code "stage 3" scripts/evaluate_rates.py; then
    for seed in 4 3; do
      for arm in $cape_arms; do
        # shellcheck disable=SC2046  # the arm's overrides, one word each
        one_run "issue 45 point 4" cape "$seed" "recipes/synth/study/cape_parts/$arm" "" "window:2.5" ctc "$arm" tempo \
          $(cape_arm "$arm") || failed=1
      done
    done
  else
    failed=1
  fi
fi

if [ "$stage" -le 4 ] && [ "$stop_stage" -ge 4 ]; then
  check_inputs
  log "stage 4: the transducer arm (issue 44 point 5), five PEs, seeds 2, 3 -> recipes/synth/study/transducer"
  if needs_code "stage 4" asr_pe/models/transducer.py; then
    for seed in 2 3; do
      for pe in "${transducer_pe_list[@]}"; do
        cands="window:2.5"; [ "$pe" = sinusoidal ] && cands="window:2.5,window:5"
        one_run "issue 44 point 5" "$pe" "$seed" recipes/synth/study/transducer "" "$cands" transducer || failed=1
      done
    done
  else
    failed=1
  fi
fi
# the arms' attention (stage 5): one run trained again, compared with its arm's archive, its
# attention measured on the ladder's test pool, archived and committed
attention_run() {  # arm (the folder of study/arms/) experiment pe seed
  local arm=$1 exp=$2 pe=$3 seed=$4
  local run=${pe}_ctc_s${seed} dest=recipes/synth/study/attention/arms/$arm
  local runs_dir=$work_dir/runs/arms/$arm
  local rundir=$runs_dir/$run runlog=$work_dir/logs/arms-$arm-$run.log
  if run_py recipes/synth/study/backlog.py archived "$commit_repo/$dest" "$run" --table-only; then
    log "  arms/$arm/$run: archived in $dest, skipped"; return 0
  fi
  if [ ! -f "$rundir/eval/done.json" ]; then
    log "  arms/$arm/$run: training (log $runlog)"
    run_py train.py -m experiment="$exp" hydra.sweep.dir="$runs_dir" pe="$pe" seed="$seed" >> "$runlog" 2>&1 \
      || { log "  arms/$arm/$run: training FAILED (see $runlog)"; return 1; }
  fi
  [ -f "$rundir/eval/done.json" ] || { log "  arms/$arm/$run: no eval/done.json after training (see $runlog)"; return 1; }
  if [ ! -f "$rundir/attention_stats/attention_stats.csv" ]; then
    log "  arms/$arm/$run: attention on the ladder's test pool (log $runlog)"
    local sets="$ladder_dir/ladder_test_alone.jsonl" r
    for r in 5 10 20 40 80 160; do sets+=",$ladder_dir/ladder_test_gap500ms_$r.jsonl"; done
    # the statistics with the commit checkout's code (as study/attention/ measured the other runs)
    (cd "$commit_repo" && PYTHONPATH="$commit_repo" run_py scripts/attention_vs_length.py run="$rundir" per_bucket=50 \
       "data.test=[$sets]" >> "$runlog" 2>&1) || { log "  arms/$arm/$run: attention FAILED (see $runlog)"; return 1; }
  fi
  # Lanes that share an arm (--seeds) take turns from here to the commit, as one_run: each adds its run
  # (and its line of retrained.jsonl) to what the others committed since this run started
  local reproduced
  retrain_archive "arms/$arm/$run" "$rundir" "recipes/synth/study/arms/$arm" "$work_dir/archive/arms/$arm" "$dest" \
    || return 1
  local line
  line=$(run_py recipes/synth/study/backlog.py attention-summary "$rundir") \
    || stop_lane "arms/$arm/$run: attention summary FAILED" "$repo/$dest" "$run"
  log "  arms/$arm/$line"
  commit_paths "issue 48 point 7: arms/$arm, $run retrained (archived run reproduced: $reproduced), its attention on the ladder's test pool; $line" \
    "$dest/results.jsonl.xz" "$dest/retrained.jsonl" || stop_lane "arms/$arm/$run: commit FAILED" "$repo/$dest" "$run"
  flock -u 8
}

if [ "$stage" -le 5 ] && [ "$stop_stage" -ge 5 ]; then
  check_inputs
  log "stage 5: the arms' attention (issue 48 point 7) -> recipes/synth/study/attention/arms/<arm>"
  for arm in "${arm_list[@]}"; do
    arm_runs "$arm"
    for seed in $seeds; do
      for pe in $pes; do
        attention_run "$arm" "synth_arm_$arm" "$pe" "$seed" || failed=1
      done
    done
  done
fi
# CAPE's parts on the hop ladder (stage 6): one arm's run trained again, compared with its archive,
# decoded on the hop ladder of `test`, archived and committed
hop_run() {  # arm seed
  local arm=$1 seed=$2
  local run=cape_ctc_s${seed} dest=recipes/synth/study/cape_parts/hop/$arm
  local runs_dir=$work_dir/runs/hop/$arm
  local rundir=$runs_dir/$run runlog=$work_dir/logs/hop-$arm-$run.log
  if run_py recipes/synth/study/backlog.py archived "$commit_repo/$dest" "$run" --table-only; then
    log "  hop/$arm/$run: archived in $dest, skipped"; return 0
  fi
  if [ ! -f "$rundir/eval/done.json" ]; then
    log "  hop/$arm/$run: training (log $runlog)"
    # shellcheck disable=SC2046  # the arm's overrides, one word each
    run_py train.py -m experiment=synth_study hydra.sweep.dir="$runs_dir" pe=cape seed="$seed" \
      $(cape_arm "$arm") arm="$arm" >> "$runlog" 2>&1 || { log "  hop/$arm/$run: training FAILED (see $runlog)"; return 1; }
  fi
  [ -f "$rundir/eval/done.json" ] || { log "  hop/$arm/$run: no eval/done.json after training (see $runlog)"; return 1; }
  log "  hop/$arm/$run: the hop ladder of test (log $runlog)"
  run_py scripts/evaluate_rates.py run="$rundir" axis=hop_ms data.test=test device=cpu >> "$runlog" 2>&1 \
    || { log "  hop/$arm/$run: evaluate_rates FAILED (see $runlog)"; return 1; }
  local reproduced
  # the arm's archive as the commit checkout has it: a worktree of stage 3's commit predates it
  retrain_archive "hop/$arm/$run" "$rundir" "$commit_repo/recipes/synth/study/cape_parts/$arm" "$work_dir/archive/hop/$arm" \
    "$dest" || return 1
  commit_paths "issue 45 point 4: cape_parts/hop/$arm, $run retrained (archived run reproduced: $reproduced), on the hop ladder of test" \
    "$dest/results.jsonl.xz" "$dest/retrained.jsonl" || stop_lane "hop/$arm/$run: commit FAILED" "$repo/$dest" "$run"
  flock -u 8
}

if [ "$stage" -le 6 ] && [ "$stop_stage" -ge 6 ]; then
  check_inputs
  log "stage 6: CAPE's parts on the hop ladder (issue 45 point 4), seeds 4, 3 -> recipes/synth/study/cape_parts/hop/<arm>"
  if needs_code "stage 6" scripts/evaluate_rates.py; then
    for seed in 4 3; do
      for arm in $cape_arms; do
        hop_run "$arm" "$seed" || failed=1
      done
    done
  else
    failed=1
  fi
fi
# The RoPE controls at 160 s (stage 7). A run's folder is runs/finetune160/<run>; ft_* below.
ft_dest=recipes/synth/study/finetune160
ft_methods="rope rope_pi rope_yarn_b10 rope_yarn_b32 rope_shortft"
ft_lrs="3e-4 1e-3"
ft_steps="100 300"
ft_windows="window:2.5 window:5"
ft_method() {  # method -> the fine-tune's Hydra overrides
  case "$1" in
    rope) echo "pe=rope" ;;
    rope_pi) echo "pe=rope_pi pe.attention.scaling.target_seconds=160" ;;
    rope_yarn_b10) echo "pe=rope_yarn pe.attention.scaling.target_seconds=160 pe.attention.scaling.beta=10" ;;
    rope_yarn_b32) echo "pe=rope_yarn pe.attention.scaling.target_seconds=160 pe.attention.scaling.beta=32" ;;
    rope_shortft) echo "pe=rope data.concat_max_seconds=null" ;;   # the continuation control
  esac
}
ft_part() { [[ ",$ft_parts," == *",$1,"* ]]; }   # is this part of stage 7 this lane's?
ft_mine() { [[ ",$ft_models," == *",$1,"* ]]; }   # is this model of the controls this lane's?
ft_windowed() { [ "$1" = rope_shortft ]; }   # decoded with the window (so is the source), chosen on dev
ft_rundir() { echo "$work_dir/runs/finetune160/$1"; }
ft_cand() { echo "${1}_ft160_lr${2}_st${3}_ctc_s${4}"; }   # method lr steps seed -> run name
ft_train() {  # run, then train.py's arguments: resume=auto trains what the folder lacks (nothing once trained)
  local run=$1; shift
  log "  finetune160/$run: training (log $work_dir/logs/finetune160-$run.log)"
  run_py train.py "$@" run_dir="$(ft_rundir "$run")" eval_after_train=false resume=auto \
    >> "$work_dir/logs/finetune160-$run.log" 2>&1 || { log "  finetune160/$run: training FAILED"; return 1; }
}
ft_ready=""   # the seeds whose source this lane has trained (or found trained) so far
ft_source() {  # seed: the source model: its archived weights (sources/), else trained by the study's recipe and archived
  [[ " $ft_ready " == *" $1 "* ]] && return 0
  local run="source_rope_ctc_s$1" rd archived
  rd=$(ft_rundir "$run")
  archived=$commit_repo/$ft_dest/sources/$run
  if [ -f "$archived/source.json" ] && [ ! -e "$rd/checkpoints/best.ckpt" ]; then
    # trained in an earlier session: its weights, not a retrain (the same weights only on one machine type)
    rm -rf "$rd"; mkdir -p "$(dirname "$rd")"; cp -r "$archived" "$rd"
    log "  finetune160/$run: the weights archived in ${archived#"$commit_repo/"}"
  elif [ ! -f "$rd/source.json" ]; then   # (not a copied source: resume=auto would train that folder afresh)
    ft_train "$run" experiment=synth_study pe=rope seed="$1" || return 1
  fi
  # a source trained again must be the weights archived and the ones the archived fine-tunes of it started
  # from, or the seed's grid would compare fine-tunes of two models: the lane stops
  if ! run_py recipes/synth/study/backlog.py same-source "$commit_repo/$ft_dest" "$rd" \
       >> "$work_dir/logs/finetune160-$run.log" 2>&1; then
    log "  finetune160/$run: NOT the source the archived fine-tunes started from" \
        "(see $work_dir/logs/finetune160-$run.log); stopped"
    exit 1
  fi
  # (a failed export is logged and not fatal: this session's fine-tunes still record the weights' digest)
  [ -f "$archived/source.json" ] || ft_export_source "$run" || true
  ft_ready+=" $1"
}
ft_export_source() {  # run: the source's weights archived (sources/<run>/) and committed, for later sessions
  local run=$1 out f
  out=$repo/$ft_dest/sources/$run
  take_archive_turn
  if [ -f "$commit_repo/$ft_dest/sources/$run/source.json" ]; then   # another lane's, since ft_source looked
    flock -u 8
    run_py recipes/synth/study/backlog.py same-source "$commit_repo/$ft_dest" "$(ft_rundir "$run")" \
      >> "$work_dir/logs/finetune160-$run.log" 2>&1 \
      || { log "  finetune160/$run: NOT the source another lane archived; stopped"; exit 1; }
    return 0
  fi
  sync_dest "$ft_dest"
  rm -rf "$out"   # not in the commit checkout (looked just now, holding the turn): an export whose commit failed
  mkdir -p "$(dirname "$out")"
  run_py recipes/synth/study/backlog.py export-source "$(ft_rundir "$run")" "$out" >> "$work_dir/logs/finetune160-$run.log" 2>&1 \
    || { log "  finetune160/$run: exporting its weights FAILED"; flock -u 8; return 1; }
  local -a paths=()
  while IFS= read -r f; do paths+=("${f#"$repo/"}"); done < <(find "$out" -type f | sort)
  commit_paths "issue 48 point 4: finetune160, $run's weights archived (sources/$run: a later session fine-tunes them)" \
    "${paths[@]}" || { log "  finetune160/$run: committing its weights FAILED"; flock -u 8; return 1; }
  flock -u 8
}
ft_decode() {  # run what (dev|test) [remedy]: evaluate.py on the dev ladder's 160 s rungs or on the run's test sets
  local run=$1 what=$2 remedy=${3:-} rd
  rd=$(ft_rundir "$run")
  local -a args=("run=$rd")
  [ "$what" = dev ] && args+=("data.test=[$ladder_dir/ladder_dev_gap500ms_160.jsonl,$ladder_dir/ladder_dev_nogap_160.jsonl]")
  [ -n "$remedy" ] && args+=("eval.remedy=$remedy")
  log "  finetune160/$run: $what sets${remedy:+, $remedy}"
  run_py evaluate.py "${args[@]}" >> "$work_dir/logs/finetune160-$run.log" 2>&1 \
    || { log "  finetune160/$run: decoding FAILED"; return 1; }
}
ft_archive() {  # run message: the run's table rows (and the choices so far) archived and committed
  local run=$1 msg=$2
  take_archive_turn
  sync_dest "$ft_dest"
  mkdir -p "$repo/$ft_dest"
  archive_run "$(ft_rundir "$run")" "$work_dir/archive/finetune160" "$ft_dest" || stop_lane "finetune160/$run: archiving FAILED" "$repo/$ft_dest" "$run"
  local -a paths=("$ft_dest/results.jsonl.xz")
  local f
  for f in "$repo/$ft_dest"/reports/choice_*.json; do [ -e "$f" ] && paths+=("${f#"$repo/"}"); done
  commit_paths "issue 48 point 4: finetune160, $msg" "${paths[@]}" || stop_lane "finetune160/$run: commit FAILED" "$repo/$ft_dest" "$run"
  flock -u 8
}
ft_archived() { run_py recipes/synth/study/backlog.py archived "$commit_repo/$ft_dest" "$1" --table-only ${2:+--with-set "$2"}; }
ft_dev_run() {  # method lr steps seed source: a grid run of seed 2 trained, decoded on the dev rungs, archived
  local m=$1 lr=$2 steps=$3 seed=$4 run
  run=$(ft_cand "$m" "$lr" "$steps" "$seed")
  ft_archived "$run" "ladder_dev_nogap_160$(ft_windowed "$m" && echo _window5)" && return 0
  ft_source "$seed" || return 1
  # shellcheck disable=SC2046  # the method's overrides, one word each
  ft_train "$run" experiment=synth_finetune160 init_from="$(ft_rundir "source_rope_ctc_s$seed")" seed="$seed" \
    optim.lr="$lr" trainer.max_steps="$steps" arm="${m}_lr${lr}_st${steps}" $(ft_method "$m") || return 1
  local w
  if ft_windowed "$m"; then
    for w in $ft_windows; do ft_decode "$run" dev "$w" || return 1; done
  else
    ft_decode "$run" dev || return 1
  fi
  ft_archive "$run" "$run trained, on the dev ladder's 160 s rungs"
}
ft_test_run() {  # run remedy seed train-args...: a chosen model (trained when its folder lacks it) decoded on test, archived
  local run=$1 remedy=$2 seed=$3; shift 3
  ft_archived "$run" "longform${remedy:+$(run_py -m asr_pe.inference.remedy_specs suffix "$remedy")}" && return 0
  case "$run" in
    rope_yardstick160_*) ft_train "$run" "$@" || return 1 ;;      # from scratch
    source_*) ft_source "$seed" || return 1 ;;
    *) { ft_source "$seed" && ft_train "$run" "$@"; } || return 1 ;;
  esac
  if [ "$seed" = 2 ] && [ "$run" != "rope_yardstick160_ctc_s2" ]; then   # its dev decodings, in the table already
    local w
    if [ -n "$remedy" ]; then for w in $ft_windows; do ft_decode "$run" dev "$w" || return 1; done
    else ft_decode "$run" dev || return 1; fi
  fi
  ft_decode "$run" test || return 1
  [ -z "$remedy" ] || ft_decode "$run" test "$remedy" || return 1
  ft_archive "$run" "$run on test and the long-form set${remedy:+ (plain and $remedy)}"
}

if [ "$stage" -le 7 ] && [ "$stop_stage" -ge 7 ]; then
  check_inputs
  log "stage 7: the RoPE controls at 160 s (issue 48 point 4), seeds ${ft_seeds// /, } -> $ft_dest"
  if needs_code "stage 7" conf/experiment/synth_finetune160.yaml; then
    for seed in $ft_seeds; do
      if ft_part controls; then   # the source, the grid (seed 2) and the chosen fine-tunes
        dev_failed=0
        if [ "$seed" = 2 ]; then   # the grid, then each method's choice on dev
          for m in $ft_methods; do
            ft_mine "$m" || continue
            for lr in $ft_lrs; do for steps in $ft_steps; do ft_dev_run "$m" "$lr" "$steps" 2 || dev_failed=1; done; done
          done
          run=source_rope_ctc_s2
          if ft_mine source && ! ft_archived "$run" ladder_dev_nogap_160_window5; then
            if ft_source 2; then
              for w in $ft_windows; do ft_decode "$run" dev "$w" || dev_failed=1; done
              [ "$dev_failed" = 1 ] || ft_archive "$run" "$run trained (the study's recipe), on the dev ladder's 160 s rungs"
            else dev_failed=1; fi
          fi
        fi
        # a choice among fewer candidates than offered would be another choice: none without all of them
        [ "$dev_failed" = 0 ] || { log "  stage 7: seed 2's dev runs are incomplete; no choice, nothing on test"; failed=1; break; }
        for m in source $ft_methods; do
          ft_mine "$m" || continue
          choice=$commit_repo/$ft_dest/reports/choice_${m}_s2.json
          if [ "$seed" = 2 ] && [ ! -f "$choice" ]; then
            cands=()
            if [ "$m" = source ]; then
              for w in $ft_windows; do cands+=("source_rope_ctc_s2@$w"); done
            else
              for lr in $ft_lrs; do for steps in $ft_steps; do
                c=$(ft_cand "$m" "$lr" "$steps" 2)
                if ft_windowed "$m"; then for w in $ft_windows; do cands+=("$c@$w"); done; else cands+=("$c"); fi
              done; done
            fi
            mkdir -p "$repo/$ft_dest/reports"
            chosen=$(run_py recipes/synth/study/backlog.py choose "$commit_repo/$ft_dest" "${cands[@]}" \
                     --sets ladder_dev_gap500ms_160 ladder_dev_nogap_160 --out "$repo/$ft_dest/reports/choice_${m}_s2.json") \
              || { log "  stage 7: the choice of $m FAILED"; failed=1; continue; }
            log "  stage 7: $m: chosen on dev $chosen"
            [ "$commit_repo" = "$repo" ] || { mkdir -p "$(dirname "$choice")"; cp "$repo/$ft_dest/reports/choice_${m}_s2.json" "$choice"; }
          fi
          [ -f "$choice" ] || { log "  stage 7: no choice for $m in $choice yet (seed 2 makes it)"; failed=1; continue; }
          chosen=$(run_py -c "import json, sys; print(json.load(open(sys.argv[1]))['chosen'])" "$choice") \
            || { log "  stage 7: $choice unreadable"; failed=1; continue; }
          base=${chosen%%@*} remedy=""; [[ "$chosen" == *@* ]] && remedy=${chosen#*@}
          if [ "$m" = source ]; then
            ft_test_run "source_rope_ctc_s$seed" "$remedy" "$seed" || failed=1
          else
            lr=${base#*_lr}; lr=${lr%%_st*}; steps=${base#*_st}; steps=${steps%%_*}
            [ "$(ft_cand "$m" "$lr" "$steps" 2)" = "$base" ] \
              || { log "  stage 7: $choice names $base, not a run of $m's grid"; failed=1; continue; }
            # shellcheck disable=SC2046
            ft_test_run "$(ft_cand "$m" "$lr" "$steps" "$seed")" "$remedy" "$seed" experiment=synth_finetune160 \
              init_from="$(ft_rundir "source_rope_ctc_s$seed")" seed="$seed" optim.lr="$lr" trainer.max_steps="$steps" \
              arm="${m}_lr${lr}_st${steps}" $(ft_method "$m") || failed=1
          fi
        done
      fi
      if ft_part yardstick; then
        ft_test_run "rope_yardstick160_ctc_s$seed" "" "$seed" experiment=synth_yardstick160 pe=rope seed="$seed" || failed=1
      fi
    done
  else
    failed=1
  fi
fi
[ "$failed" -eq 0 ] || { log "some runs failed; run the same command again to retry them"; exit 1; }
log "backlog: done"
exit 0
}
