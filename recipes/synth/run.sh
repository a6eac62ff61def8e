#!/usr/bin/env bash
# The embedded-corpus recipe, staged and resumable (icefall style):
#   stage 0: the corpora of the demo and the study + 160 s long-form  python -m asr_pe.data.synth
#   stage 1: the demo model (experiment=demo)                         train.py, evaluates at the end
#   stage 2: the length study, one run per PE x seed                  train.py -m experiment=synth_study
#   stage 3: attention statistics (seed 0), inference remedies          attention_vs_length.py, evaluate.py
#   stage 4: archive the runs' result files, WER/CER-vs-length report   scripts/plot_wer_vs_length.py
# Usage: recipes/synth/run.sh [--stage N] [--stop_stage M] [--pes "none,rope"] [--seeds "0,1"] [--jobs J] [--threads T]
#                             [--experiment synth_study|synth_remedy_posscale|synth_arm_conformer|...]
#                             [--loss ctc|seq2seq|hybrid] [--extra "k=v ..."]
#                             [--remedy_pes "rope,sinusoidal"] [--remedies "window logit_scale ..."]
#                             [--attention_seeds "0"]
#                             [--study_dir D] [--archive_dir D] [--report_dir D]
#                             [--report_sets "test longform"] [--summary_sets "test longform"]
# Every stage skips what is done: the corpus is cached, finished runs are skipped, interrupted
# runs resume from their last checkpoint (resume=auto).
# Stage 2 trains one run per process, seed-major (every PE of the first seed before the next
# seed); each run appends to <study_dir>/logs/<pe>_<loss>_s<seed>.log (a resumed run keeps the log
# of its interrupted part, a skipped one adds a line). --jobs J trains J runs at a
# time with nproc/J threads each. Measured on 2 cores (2026-11-24, pe=none, 71-step epochs after
# the first): one 2-thread run 26-28 s per epoch, two 1-thread runs side by side 46 s each, i.e.
# 3.1 against 2.6 steps/s in all, so the default is two runs at a time (the study sets
# data.num_workers=0: with a feature worker per run, two runs made ~0.55 steps/s each, 2026-11-23).
# One 2-thread run of the study takes 7.5-9.5 min. --threads T overrides nproc/J, e.g. two calls
# side by side (one study and one arm) with --jobs 1 --threads 1 each.
# --experiment (stage 2): the study or one of its arms (conf/experiment/synth_remedy_*.yaml: training
# remedies; synth_arm_*.yaml: Conformer, CAPE with covered positions, the 70 ms front end); its PE and
# seed lists are the defaults of --pes / --seeds. Give each arm its own --study_dir.
# Stage 3 first writes the attention statistics (scripts/attention_vs_length.py, 3 utterances per
# bucket, ~1 min a run) of each finished run of --attention_seeds (the summary's attention table),
# then evaluates each finished run of --remedy_pes (default: the PEs the study found degrading,
# rope sinusoidal t5 shaw relative) with every inference remedy of --remedies that applies to it
# (rope_* only for rope) and with overlapping chunked inference (the reference), into
# eval/<set>_<remedy>, with reuse=true: a result of this checkpoint's bytes and these settings is
# read back, any other decoded again (asr_pe/evaluation/reuse.py).
# --loss (stage 2) picks the head; runs are named <pe>_<loss>_s<seed>, so one study folder holds
# the CTC and the seq2seq/hybrid studies side by side. Stage 3 archives every evaluated run but
# reports only the runs of --loss, on the eval/ sets of --report_sets (a second decoding of the
# same models, evaluate.py eval.suffix=_joint, is the set test_joint), each set's degradation
# measured against the same decoding of the short test set (longform_ctc against test_ctc);
# --summary_sets "short long" names the two sets of the summary table ("" for none).
set -euo pipefail
# The body is one { ... } block, read in full before it runs: editing this file while a sweep is
# under way cannot make the running copy execute a mix of old and new lines.
{
stage=0
stop_stage=3
pes=""          # empty: the study's default list (conf/experiment/synth_study.yaml)
seeds=""        # empty: 0,1
jobs=2          # stage 2: runs trained at once (nproc/jobs threads each)
threads=""      # stage 2: threads per run (empty: nproc/jobs)
loss=ctc        # stage 2: the head (conf/loss/<loss>.yaml)
experiment=synth_study  # stage 2: conf/experiment/<experiment>.yaml
remedy_pes="rope,sinusoidal,t5,shaw,relative"  # stage 3
remedies="window window:10 logit_scale rope_pi rope_ntk rope_yarn chunked"  # stage 3 (chunked: eval.mode=chunked)
attention_seeds="0"  # stage 3: runs whose attention statistics are written ("" for none)
extra=""
study_dir=runs/synth_study
report_dir=runs/synth_study/report
archive_dir=runs/synth_study/archive
report_sets="test longform"
summary_sets="test longform"

synth_options=" --stage --stop_stage --pes --seeds --jobs --threads --loss --experiment --remedy_pes --remedies \
--attention_seeds --extra --study_dir --report_dir --archive_dir --report_sets --summary_sets "
while [ $# -gt 0 ]; do
  # the name first: a misspelt last option is unknown, not one that needs a value (or an unbound $2)
  case "$synth_options" in
    *" $1 "*) [ $# -ge 2 ] || { echo "$0: error: option $1 needs a value" >&2; exit 2; } ;;
    *) echo "$0: error: unknown option $1" >&2; exit 2 ;;
  esac
  case "$1" in
    --stage) stage=$2; shift 2 ;;
    --stop_stage) stop_stage=$2; shift 2 ;;
    --pes) pes=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --experiment) experiment=$2; shift 2 ;;
    --remedy_pes) remedy_pes=$2; shift 2 ;;
    --remedies) remedies=$2; shift 2 ;;
    --attention_seeds) attention_seeds=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    --study_dir) study_dir=$2; shift 2 ;;
    --report_dir) report_dir=$2; shift 2 ;;
    --archive_dir) archive_dir=$2; shift 2 ;;
    --report_sets) report_sets=$2; shift 2 ;;
    --summary_sets) summary_sets=$2; shift 2 ;;
  esac
done

repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/recipes/lib/stage_range.sh"
check_stage_range 4
cd "$repo"
source "$repo/recipes/python.sh"   # $PYTHON: set, or .venv/bin/python; checked
log() { echo "[$(date '+%H:%M:%S')] $*"; }

if [ "$stage" -le 0 ] && [ "$stop_stage" -ge 0 ]; then
  # the demo trains on the corpus defaults (2500 utterances), the study on more of the same
  # utterances (data.corpus.num_train of its config); dev, test and long-form are shared
  study_num_train=$("$PYTHON" -c "from omegaconf import OmegaConf as O; \
print(O.load('conf/experiment/synth_study.yaml').data.corpus.num_train)")
  log "stage 0: synth corpus (demo), and with $study_num_train training utterances (study)"
  "$PYTHON" -m asr_pe.data.synth --longform 160
  "$PYTHON" -m asr_pe.data.synth --longform 160 --num-train "$study_num_train"
fi

if [ "$stage" -le 1 ] && [ "$stop_stage" -ge 1 ]; then
  log "stage 1: demo model"
  # shellcheck disable=SC2086
  "$PYTHON" train.py experiment=demo run_dir=runs/synth_demo resume=auto $extra
fi

if [ "$stage" -le 2 ] && [ "$stop_stage" -ge 2 ]; then
  log "stage 2: length study in $study_dir"
  all_pes="$pes"
  all_seeds="$seeds"
  if [ -z "$all_pes" ] || [ -z "$all_seeds" ]; then
    # The study's default PE and seed lists live in its config (an arm's own, or the study's
    # that it starts from); read them from there.
    read -r default_pes default_seeds < <("$PYTHON" -c "from omegaconf import OmegaConf as O; \
c = O.load('conf/experiment/$experiment.yaml'); \
p = (c.get('hydra') or {}).get('sweeper', {}).get('params') or O.load('conf/experiment/synth_study.yaml').hydra.sweeper.params; \
print(p.pe, p.seed)")
    all_pes="${all_pes:-$default_pes}"
    all_seeds="${all_seeds:-$default_seeds}"
  fi
  # Each run is its own process (a multirun of one job), so one failed run does not stop the
  # sweep; the cores are shared out evenly between the runs trained at once.
  if [ -z "$threads" ]; then
    threads=$(( $(nproc) / jobs )); [ "$threads" -ge 1 ] || threads=1
  elif ! [[ "$threads" =~ ^[1-9][0-9]*$ ]]; then
    echo "run.sh: --threads must be a positive integer (got '$threads')" >&2; exit 2
  fi
  mkdir -p "$study_dir/logs"
  one_run() {  # pe seed
    local run_log="$study_dir/logs/$1_${loss}_s$2.log"
    log "  start $1 $loss seed $2 ($threads threads)"
    # shellcheck disable=SC2086
    if OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads "$PYTHON" train.py -m experiment="$experiment" \
        hydra.sweep.dir="$study_dir" pe="$1" seed="$2" loss="$loss" $extra >> "$run_log" 2>&1; then
      log "  done $1 $loss seed $2"
    else
      log "  FAILED $1 $loss seed $2 (see $run_log)"; return 1
    fi
  }
  export -f one_run log
  export PYTHON study_dir extra loss threads experiment
  # A signal to run.sh (kill, timeout, a batch system's stop) must stop the runs it started: xargs
  # and its shells die with run.sh but would leave each train.py running. On INT, TERM or HUP:
  # SIGTERM to every process below run.sh (Lightning stops at the end of its step and saves
  # last.ckpt, so `--stage 2` again resumes), wait for them, exit 128 + the signal's number; a
  # second signal kills what is left. The sweep runs in the background so the wait can be
  # interrupted (bash runs a trap only once a foreground command has ended).
  descendants() { local c; for c in $(pgrep -P "$1"); do descendants "$c"; echo "$c"; done; }
  running() { [ -r "/proc/$1/stat" ] && [ "$(cut -d')' -f2 "/proc/$1/stat" | cut -d' ' -f2)" != Z ]; }  # not a zombie
  stopping=""
  stop_runs() {  # signal name, exit status
    local pids p
    pids=$(descendants $$)
    if [ -n "$stopping" ]; then kill -KILL $pids 2>/dev/null; exit "$2"; fi
    stopping=$1
    log "SIG$1: stopping the runs of stage 2 (pids $(echo $pids)) and exiting" >&2
    kill -TERM $pids 2>/dev/null
    for p in $pids; do while running "$p"; do sleep 0.2; done; done
    exit "$2"
  }
  trap 'stop_runs INT 130' INT
  trap 'stop_runs TERM 143' TERM
  trap 'stop_runs HUP 129' HUP
  failed=0
  for seed in ${all_seeds//,/ }; do for pe in ${all_pes//,/ }; do echo "$pe $seed"; done; done \
    | xargs -P "$jobs" -L 1 bash -c 'one_run "$0" "$1"' &
  wait $! || failed=1
  trap - INT TERM HUP
  [ "$failed" -eq 0 ] || log "stage 2: some runs failed (see $study_dir/logs); re-run to retry them"
fi

if [ "$stage" -le 3 ] && [ "$stop_stage" -ge 3 ]; then
  log "stage 3: attention statistics (seeds $attention_seeds), inference remedies ($remedies) on the $loss runs of $remedy_pes in $study_dir"
  for info in "$study_dir"/*_"${loss}"_s*/run_info.json; do
    [ -e "$info" ] || continue
    run=$(dirname "$info")
    [ -f "$run/eval/done.json" ] || continue
    # run_info.json "pe", eval/done.json: the run folder as asr_pe/run_folder.py lays it out
    pe=$(grep -o '"pe": *"[^"]*"' "$info" | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
    seed=${run##*_s}
    if [[ " ${attention_seeds//,/ } " == *" $seed "* ]] && [ ! -f "$run/attention_stats/attention_stats.csv" ]; then
      log "  $(basename "$run"): attention statistics"
      "$PYTHON" scripts/attention_vs_length.py run="$run" per_bucket=3 out="$run/attention_stats" \
        > "$run/eval/attention_stats.log" 2>&1 \
        || log "  FAILED $(basename "$run") attention statistics (see $run/eval/attention_stats.log)"
    fi
    [[ ",$remedy_pes," == *",$pe,"* ]] || continue
    for remedy in $remedies; do
      if [ "$remedy" = chunked ]; then
        suffix=_chunked; args=(eval.mode=chunked eval.suffix=_chunked)
      else  # whether it applies to this PE, and the folder name evaluate.py gives it: asked of remedy_specs.py
        [ "$("$PYTHON" -m asr_pe.inference.remedy_specs applies "$remedy" "$pe")" = yes ] || continue
        suffix=$("$PYTHON" -m asr_pe.inference.remedy_specs suffix "$remedy")
        args=("eval.remedy=$remedy")
      fi
      log "  $(basename "$run"): $remedy (reuse=true: results of this checkpoint and these settings are kept)"
      "$PYTHON" evaluate.py run="$run" "${args[@]}" reuse=true > "$run/eval/remedy$suffix.log" 2>&1 \
        || log "  FAILED $(basename "$run") $remedy (see $run/eval/remedy$suffix.log)"
    done
  done
fi

if [ "$stage" -le 4 ] && [ "$stop_stage" -ge 4 ]; then
  # The report is drawn from an archive of each evaluated run's small result files (run_info,
  # config, per-bucket scores, per-utterance scores, attention statistics; no checkpoints), one
  # table <archive_dir>/results.jsonl.xz (asr_pe/results_table.py): commit it and the figures
  # regenerate from the repository alone, after the run folders are gone. Archiving a run again
  # replaces its rows.
  log "stage 4: archive in $archive_dir/results.jsonl.xz, report in $report_dir"
  evaluated=()
  for info in "$study_dir"/*/run_info.json; do
    [ -e "$info" ] || continue
    run=$(dirname "$info")
    # eval/done.json: written by train.py once every test set is scored (a run still being
    # evaluated, or killed between two sets, is left out)
    [ -f "$run/eval/done.json" ] || { log "  $(basename "$run"): not evaluated yet"; continue; }
    evaluated+=("$run")
  done
  if [ "${#evaluated[@]}" -gt 0 ]; then
    "$PYTHON" -m asr_pe.results_table add "$archive_dir" "${evaluated[@]}" > /dev/null
  fi
  # the runs of this head only: <archive_dir>/<run> paths, which the readers find in the table
  mapfile -t runs < <("$PYTHON" -m asr_pe.results_table list "$archive_dir" "*_${loss}_s*")
  [ "${#runs[@]}" -gt 0 ] || { log "  no archived ${loss} runs in $archive_dir"; exit 1; }
  for set in $report_sets; do
    for metric in wer cer; do
      # --reference-set: the long-form recordings are all 136-174 s, so their degradation is
      # measured against each model's 2-4 s bucket of the short test set, decoded the same way
      "$PYTHON" scripts/plot_wer_vs_length.py "${runs[@]}" --test-set "$set" --metric "$metric" \
        --reference-set "${set/longform/test}" --out "$report_dir/$set" > /dev/null
    done
  done
  if [ -n "$summary_sets" ]; then
    read -r short_set long_set <<< "$summary_sets"
    decoding_sets=()  # every report set but the long-form one: a row per PE and decoding
    for set in $report_sets; do [ "$set" = "$long_set" ] || decoding_sets+=("$set"); done
    # the summary tables of RESULTS.md: seed means with per-seed values at 0-2, 2-4, 32-64 s and
    # long-form, ratios to 2-4 s; attention vs length for runs with attention_stats/; CER [CI] per
    # bucket of each decoding, the long-form CER beside the decoding that has one
    "$PYTHON" scripts/study_summary.py "${runs[@]}" --short "$short_set" --long "$long_set" \
      --attention-names "2-4 s" "32-64 s" "160 s" \
      ${decoding_sets[0]+--decodings "${decoding_sets[@]}" --decodings-long "$long_set"} \
      --out "$report_dir/summary.md" > /dev/null
    # the figures of RESULTS.md: CER vs length faceted by PE family with the long/short ratio
    # panel, and one figure per remedied PE (plain model, each remedy of stage 3, chunked)
    # shellcheck disable=SC2046
    "$PYTHON" scripts/plot_study_figures.py --runs "${runs[@]}" --out "$report_dir" \
      --short "$short_set" --long "$long_set" --remedies-for $(tr ',' ' ' <<< "$remedy_pes") > /dev/null \
      || log "  no study figures (the error above); the tables and per-set plots are written"
    # the remedy table: per PE and remedy, CER at 2-4 s, 32-64 s and long-form, ratio and cost
    "$PYTHON" scripts/study_summary.py "${runs[@]}" --short "$short_set" --long "$long_set" --remedies \
      > "$report_dir/remedies.md.tmp" && mv "$report_dir/remedies.md.tmp" "$report_dir/remedies.md"
  fi
fi
log "done"
exit 0
}
