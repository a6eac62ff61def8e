# Sourced by the corpus recipes (recipes/<corpus>/run.sh) after they set their defaults and $repo:
# the option parsing and the stages every corpus shares. The layout of a corpus recipe is
#   stage 0  download (corpus-specific; `needs_archives`, `downloaded`, `download_archive` help)
#   stage 1  extract (corpus-specific)
#   stage 2  manifests <work_dir>/manifests/<set>.jsonl (corpus-specific)
#   stage 3  long-form sets <set>_long.jsonl             stage_longform SET...
#   stage 4  train one model per PE in $pes              stage_train [OVERRIDE...]
#   stage 5  evaluate every run on the test sets         stage_evaluate (+ the rate ladders of
#            --rate_axes on the natural sets)
#   stage 6  WER-vs-length figures per test set + all sets stage_plot (+ the in-context table,
#            the natural sets in 5 s bins, the rate ladders; the CAPE paper's figures captioned
#            with what it did and the recipe's $corpus_note)
# The recipe defines `test_sets` (names of the test manifests that exist, one a line; see
# `existing_sets`) and may redefine `check_test_sets`, `longform_done`, `built_from` and `natural_set`
# (defaults below).
# recipes/librispeech/run.sh and recipes/tedlium3/run.sh are the models.
#
# `source` reads this whole file before running any of it, and it only defines functions and
# constants, so editing it while a recipe runs does not change the running copy (like the recipes'
# own { ... } blocks).

source "$(dirname "${BASH_SOURCE[0]}")/stage_range.sh"   # check_stage_range

# Options of every corpus recipe; a recipe adds its own in `parse_options NAME... -- "$@"`.
recipe_common_options="stage stop_stage work_dir data_dir corpus_dir mirror verify checksums longform_durations \
pes experiment extra eval_extra smoke metric heldout_fraction rate_axes"
# defaults of the common options a recipe need not set itself
metric=${metric:-wer}                      # stage 6: wer | cer (figures, tables, in-context ratios)
heldout_fraction=${heldout_fraction:-0.1}  # stage 4: chapters/talks held out of a part that is both train and dev
# stages 5-6: the CAPE paper's rate axes for the natural sets: "tempo" (audio time-stretched, pitch kept;
# sox tempo's rungs 0.8 ... 1.3), "hop_ms" (features at hops 8 ... 12 ms), both, or none (empty)
rate_axes=${rate_axes:-}
corpus_note=${corpus_note:-}               # a recipe's sentence after the paper's caption (which corpus it uses)

# smoke_requested ARG...: true when the options hold --smoke (alone, or --smoke true / --smoke=true).
# A recipe calls it before `parse_options` and then sets its smoke defaults (a small experiment,
# one corpus part, its own work_dir), so that any option given explicitly still wins.
smoke_requested() {
  local prev=""
  for a in "$@"; do
    case "$a" in
      --smoke=true) return 0 ;;
      --smoke=*) prev="" ;;
      *) [ "$prev" = --smoke ] && [ "$a" != false ] && return 0; prev=$a ;;
    esac
  done
  [ "$prev" = --smoke ]
}

# The leading comment block of the recipe, without the '#' (the --help text).
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }

# parse_options NAME... -- ARG...: set the variable of each --name value (or --name=value; dashes in
# the name read as underscores) given in ARGs. Accepted names: the common options and the NAMEs.
parse_options() {
  local accepted="$recipe_common_options" _opt _val _next _given
  while [ $# -gt 0 ] && [ "$1" != -- ]; do accepted="$accepted $1"; shift; done
  [ $# -gt 0 ] && shift
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) usage; exit 0 ;;
      --*=*) _opt="${1%%=*}"; _val="${1#*=}"; _next=false; shift ;;
      --smoke) _opt=smoke; _val=true; _next=false; shift  # a flag: --smoke alone means --smoke true
               case "${1:-}" in true|false) _val=$1; shift ;; esac ;;
      --*) _opt="$1"; _next=true; shift ;;  # its value is the next argument, once the name is known
      *) echo "$0: error: unexpected argument '$1' (options are --name value)" >&2; exit 2 ;;
    esac
    _given=$_opt
    _opt="${_opt#--}"; _opt="${_opt//-/_}"
    # the name first: a misspelt last option (--smok) is unknown, not one that "needs a value"
    case " $accepted " in
      *" $_opt "*) ;;
      *) echo "$0: error: unknown option --$_opt" >&2; usage >&2; exit 2 ;;
    esac
    if [ "$_next" = true ]; then
      [ $# -ge 1 ] || { echo "$0: error: option $_given needs a value" >&2; exit 2; }
      _val=$1; shift
    fi
    printf -v "$_opt" '%s' "$_val"
  done
  check_stage_range 6
  case "$metric" in
    wer|cer) ;;
    *) echo "$0: error: --metric '$metric': the metrics are wer and cer" >&2; exit 2 ;;
  esac
  local a
  for a in $rate_axes; do
    case "$a" in
      tempo|hop_ms) ;;
      *) echo "$0: error: --rate_axes '$rate_axes': the axes are tempo and hop_ms" >&2; exit 2 ;;
    esac
  done
}

# recipe_setup NAME: the checked interpreter ($PYTHON and PYTHONPATH, recipes/python.sh), absolute
# $work_dir with $archive_dir, $manifest_dir and $runs_dir in it, and $corpus_dir (the extracted
# tree given with --corpus_dir, else $archive_dir); NAME tags the log lines.
recipe_setup() {
  recipe_name=$1
  source "$repo/recipes/python.sh"   # $PYTHON: set, or .venv/bin/python; checked; PYTHONPATH=$repo
  mkdir -p "$work_dir"
  work_dir="$(cd "$work_dir" && pwd)"
  archive_dir="$work_dir/archives"
  manifest_dir="$work_dir/manifests"
  runs_dir="$work_dir/runs"
  if [ -n "$corpus_dir" ]; then corpus_dir="$(cd "$corpus_dir" && pwd)"; else corpus_dir="$archive_dir"; fi
}

log() { echo "$(date '+%F %T') [$recipe_name] $*"; }

# Signals: bash runs a trap only after its foreground command ends, so a SIGTERM (`timeout`, `kill`,
# a batch system) to run.sh would wait for a week-long train.py, and without a trap run.sh dies
# alone and leaves train.py running. Every stage's child therefore runs through `run_child`: in the
# background, with run.sh waiting on it (a wait that a signal interrupts). On INT, TERM or HUP
# run.sh sends the child SIGTERM (Lightning stops at the end of the current step, so last.ckpt
# stays whole; a child of a non-interactive shell ignores SIGINT, hence TERM for all three), waits
# for it and exits 128 + the signal's number; a second signal while it waits kills the child.
_child_pid=""
_stopping=""
_forward_signal() {
  local name=$1 code=$2
  if [ -n "$_stopping" ]; then
    [ -n "$_child_pid" ] && { kill -KILL "$_child_pid" 2>/dev/null || true; }
    exit "$code"
  fi
  _stopping=$name
  if [ -n "$_child_pid" ]; then
    log "SIG$name: stopping pid $_child_pid ($_child_cmd) and exiting" >&2
    kill -TERM "$_child_pid" 2>/dev/null || true
    wait "$_child_pid" 2>/dev/null || true
  else
    log "SIG$name: exiting" >&2
  fi
  exit "$code"
}
trap '_forward_signal INT 130' INT
trap '_forward_signal TERM 143' TERM
trap '_forward_signal HUP 129' HUP
# run_child CMD [ARG...]: run CMD as the stage's child (see above); returns its exit status.
run_child() {
  local rc=0
  if [ "${2:-}" = -m ]; then _child_cmd=${3:-}; else _child_cmd=${2##*/}; fi  # python train.py | -m module
  "$@" &
  _child_pid=$!
  wait "$_child_pid" || rc=$?
  _child_pid=""
  return "$rc"
}
run_stage() { [ "$stage" -le "$1" ] && [ "$stop_stage" -ge "$1" ]; }
# Comma-joined, single-quoted Hydra list: ['a','b'] (paths may hold characters Hydra would parse).
hydra_list() { local out="" x; for x in "$@"; do out="$out${out:+,}'$x'"; done; echo "[$out]"; }
has_entries() { grep -q '[^[:space:]]' "$1" 2>/dev/null; }  # a manifest with at least one line

# existing_sets "SET..." SUFFIX...: <set><suffix> for each manifest of $manifest_dir that exists,
# set by set in the order given (a recipe's `test_sets` is usually one call of this).
existing_sets() {
  local p s
  for p in $1; do
    for s in "${@:2}"; do [ -f "$manifest_dir/$p$s.jsonl" ] && echo "$p$s"; done
  done
  return 0
}
# Hooks a recipe may redefine after sourcing this file:
check_test_sets() { :; }               # check_test_sets SET...: exit with a message if one is unusable
longform_done() { [ -f "$1" ]; }       # longform_done MANIFEST: stage 3 keeps it (else builds it)
# natural_set SET: true for a set of the corpus's own utterances (stage 6 bins them by 5 s, the CAPE
# paper's length figure); default: every set but <set>_long (joined utterances) and <set>_talks
# (whole talks, 10-20 minutes: hundreds of 5 s bins of one recording each).
natural_set() {
  case "$1" in *_long|*_talks) return 1 ;; esac
  return 0
}
# built_from SET SETS...: the set among SETS that the long-form set SET was built from (its parts were
# decoded alone there: the in-context ratio's denominator and the relative degradation's reference),
# nothing for a set that is not long-form. Default: <set>_long and <set>_talks come from <set>.
built_from() {
  local s=$1 base x
  shift
  case "$s" in
    *_long) base=${s%_long} ;;
    *_talks) base=${s%_talks} ;;
    *) return 0 ;;
  esac
  for x in "$@"; do [ "$x" = "$base" ] && { echo "$base"; return 0; }; done
  return 0
}

# Stages 0-1: `if run_stage 0 && needs_archives 0; then ...`: true unless --corpus_dir named an
# extracted tree, in which case stage N logs that it is skipped.
needs_archives() {
  [ "$corpus_dir" = "$archive_dir" ] && return 0
  log "stage $1: skipped (--corpus_dir $corpus_dir given)"
  return 1
}
# downloaded NAME: stage 0 fetched NAME already (marker $archive_dir/.NAME.downloaded).
downloaded() { [ -f "$archive_dir/.$1.downloaded" ]; }
# download_archive NAME MODULE [ARG...]: `$PYTHON -m MODULE download --root $archive_dir ARG...` with
# the common --mirror/--data-dir/--no-verify/--checksums options, then mark NAME downloaded.
download_archive() {
  local name=$1 module=$2
  shift 2
  local args=(download --root "$archive_dir" "$@" --mirror "$mirror")
  [ -n "$data_dir" ] && args+=(--data-dir "$data_dir")
  [ "$verify" = true ] || args+=(--no-verify)
  [ -n "$checksums" ] && args+=(--checksums "$checksums")
  run_child "$PYTHON" -m "$module" "${args[@]}"
  touch "$archive_dir/.$name.downloaded"
}

# Stage 3: stage_longform SET...: <set>_long.jsonl from each <set>.jsonl (scripts/make_longform.py,
# $longform_durations); kept where `longform_done` says so.
stage_longform() {
  local part out durations
  log "stage 3: long-form test sets $longform_durations s"
  read -ra durations <<< "$(tr '[],' '   ' <<< "$longform_durations")"   # [10,20,full] -> 10 20 full
  for part in "$@"; do
    out="$manifest_dir/${part}_long.jsonl"
    if longform_done "$out"; then log "  $out exists"; continue; fi
    run_child "$PYTHON" "$repo/scripts/make_longform.py" --manifest "$manifest_dir/$part.jsonl" --out "$out" \
      --durations "${durations[@]}"
  done
}

# Stage 4, before training: heldout_split "TRAIN PARTS" "DEV PARTS" sets $fit_parts and $val_parts, the
# manifests to train and to validate on. A part that is both a training and a dev part (the smoke runs
# train on one small part) would validate on the utterances it trains on (val CER ~1 % against a test
# CER of 40 %, and best.ckpt chosen by it): it is split into <part>_fit (trained on) and <part>_heldout
# (validated on), $heldout_fraction of its chapters/talks held out whole (scripts/split_heldout.py,
# asr_pe/data/heldout.py). The split is kept while both files are newer than <part>.jsonl.
heldout_split() {
  local train=" $1 " dev=" $2 " p m
  fit_parts=""
  val_parts=""
  for p in $1; do
    case "$dev" in
      *" $p "*)
        m="$manifest_dir/$p"
        if [ "$m"_fit.jsonl -nt "$m.jsonl" ] && [ "$m"_heldout.jsonl -nt "$m.jsonl" ]; then
          log "stage 4: $p is a training and a dev part: ${p}_fit / ${p}_heldout exist (delete them to split again)"
        else
          log "stage 4: $p is a training and a dev part: holding out $heldout_fraction of its groups for validation"
          run_child "$PYTHON" "$repo/scripts/split_heldout.py" --manifest "$m.jsonl" --fit-out "$m"_fit.jsonl \
            --heldout-out "$m"_heldout.jsonl --fraction "$heldout_fraction"
        fi
        fit_parts="$fit_parts ${p}_fit" ;;
      *) fit_parts="$fit_parts $p" ;;
    esac
  done
  for p in $2; do
    case "$train" in
      *" $p "*) val_parts="$val_parts ${p}_heldout" ;;
      *) val_parts="$val_parts $p" ;;
    esac
  done
}

# Stage 4: stage_train [OVERRIDE...]: train.py once per PE in $pes into $runs_dir/<pe>, with the
# recipe's Hydra OVERRIDEs before $extra; skips runs whose evaluation is done.
stage_train() {
  local pe run
  log "stage 4: train pes=[$pes] experiment=$experiment"
  for pe in $pes; do
    run="$runs_dir/$pe"
    # eval/done.json: train.py writes it once every test set is scored; a run killed mid-evaluation
    # lacks it and is started again (resume=auto: training is complete, evaluation is redone).
    # The run folder's layout is defined in asr_pe/run_folder.py.
    if [ -f "$run/eval/done.json" ]; then log "  $pe: done ($run/eval/done.json exists)"; continue; fi
    # shellcheck disable=SC2086  # $extra holds several overrides on purpose
    run_child "$PYTHON" "$repo/train.py" experiment="$experiment" pe="$pe" run_dir="$run" resume=auto \
      data.corpus.manifest_dir="$manifest_dir" "$@" $extra
  done
}

# Stage 5: evaluate.py on every set of `test_sets`, per run, with reuse=true: a set whose result
# records this checkpoint's bytes and these settings (the run's own, or --eval_extra's) is read back,
# any other (missing, an older checkpoint's, other settings' or half-written) is decoded
# (asr_pe/evaluation/reuse.py). The question is never answered from the checkpoint alone: a call
# without --eval_extra after one with it decodes the run's own settings again.
stage_evaluate() {
  local -a sets todo
  local pe run s a
  mapfile -t sets < <(test_sets)
  [ "${#sets[@]}" -gt 0 ] || { echo "$0: stage 5: no test manifests in $manifest_dir (run stages 2-3)" >&2; exit 1; }
  check_test_sets "${sets[@]}"
  log "stage 5: evaluate on ${sets[*]}"
  todo=()
  for s in "${sets[@]}"; do todo+=("$manifest_dir/$s.jsonl"); done
  for pe in $pes; do
    run="$runs_dir/$pe"
    [ -d "$run" ] || { echo "$0: stage 5: $run missing (run stage 4)" >&2; exit 1; }
    log "  $pe: evaluate ${sets[*]}${eval_extra:+ with $eval_extra} (reuse=true: results of this checkpoint and these settings are kept)"
    # shellcheck disable=SC2086  # $eval_extra holds several overrides on purpose
    run_child "$PYTHON" "$repo/evaluate.py" run="$run" data.test="$(hydra_list "${todo[@]}")" reuse=true $eval_extra
    for a in $rate_axes; do
      for s in "${sets[@]}"; do
        natural_set "$s" || continue
        # the same utterances at every rung of the axis (eval/<set>_tempo1p2, ...; complete rungs reused)
        log "  $pe: $s on the $a ladder"
        # shellcheck disable=SC2086
        run_child "$PYTHON" "$repo/scripts/evaluate_rates.py" run="$run" axis="$a" \
          data.test="$(hydra_list "$manifest_dir/$s.jsonl")" reuse=true $eval_extra
      done
    done
  done
}

# Stage 6: one $metric-vs-length figure per set of `test_sets` across the runs of $pes (a long-form set's
# relative degradation against the set it was built from, `built_from`), the study's figure, and the
# in-context ratio of every long-form set per PE (plots/in_context_<metric>.{md,csv}).
stage_plot() {
  local -a sets runs pairs ref
  local pe s from a
  mapfile -t sets < <(test_sets)
  check_test_sets "${sets[@]}"
  runs=()
  for pe in $pes; do runs+=("$runs_dir/$pe"); done
  pairs=()
  for s in "${sets[@]}"; do
    from=$(built_from "$s" "${sets[@]}")
    ref=()
    if [ -n "$from" ]; then ref=(--reference-set "$from"); pairs+=(--pair "$s" "$from"); fi
    log "stage 6: plot $s ($metric) -> $work_dir/plots/$s"
    run_child "$PYTHON" "$repo/scripts/plot_wer_vs_length.py" "${runs[@]}" --test-set "$s" --metric "$metric" \
      "${ref[@]}" --out "$work_dir/plots/$s"
    if natural_set "$s"; then
      # a set of the corpus's own utterances: the CAPE paper's length figure too, WER and CER per
      # 5 s bin (0-5, 5-10, ... s; asr_pe/plots/natural_bins.py), from the same per_utt.jsonl
      log "stage 6: 5 s bins of the natural utterances of $s -> $work_dir/plots/$s/natural_bins.png"
      run_child "$PYTHON" "$repo/scripts/plot_natural_bins.py" "${runs[@]}" --test-set "$s" --out "$work_dir/plots/$s" \
        --paper-caption ${corpus_note:+--note "$corpus_note"}
      for a in $rate_axes; do  # the paper's rate figures: the same utterances faster and slower
        log "stage 6: $s on the $a ladder -> $work_dir/plots/$s/rate_$a.png"
        run_child "$PYTHON" "$repo/scripts/plot_rate_ladder.py" "${runs[@]}" --test-set "$s" --axis "$a" \
          --metric "$metric" --out "$work_dir/plots/$s" --paper-caption ${corpus_note:+--note "$corpus_note"}
      done
    fi
  done
  # the study's figure: every test set a panel, every PE a line (the CAPE paper's layout)
  log "stage 6: the study's figure -> $work_dir/plots/${metric}_vs_length_all.png"
  run_child "$PYTHON" "$repo/scripts/plot_corpus_figure.py" "${runs[@]}" --test-sets "${sets[@]}" \
    --metric "$metric" --out "$work_dir/plots/${metric}_vs_length_all.png"
  # the headline measure: each long-form recording decoded whole against its parts decoded alone
  if [ "${#pairs[@]}" -gt 0 ]; then
    log "stage 6: in-context ratios -> $work_dir/plots/in_context_$metric.md"
    run_child "$PYTHON" "$repo/scripts/in_context_table.py" "${runs[@]}" "${pairs[@]}" --metric "$metric" \
      --out "$work_dir/plots/in_context_$metric.md"
  fi
}
