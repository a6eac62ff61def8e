#!/usr/bin/env bash
# TED-LIUM 3 recipe of the WER-versus-length study (CAPE, Likhomanenko et al. 2021).
#
#   stage 0  download TEDLIUM_release-3.tgz from OpenSLR 51 (resume + sha256), or link --data_dir
#   stage 1  extract it (idempotent: marker file)
#   stage 2  manifests <work_dir>/manifests/<split>.jsonl + <split>_talks.jsonl (full talks)
#   stage 3  long-form test sets <split>_long.jsonl (consecutive segments of one talk)
#   stage 4  train one model per PE in $pes (skips runs whose evaluation is done)
#   stage 5  evaluate every run on the short and long-form test sets (skips finished sets)
#   stage 6  WER-vs-length figures, one per test set, across all runs
#
# Usage: recipes/tedlium3/run.sh [--stage N] [--stop_stage M] [--name value ...]
# Every variable below can be set with --name value (or --name=value); see README.md.
set -euo pipefail
# The body is one { ... } block, read in full before it runs: editing this file while a long job
# is under way cannot make the running copy execute a mix of old and new lines.
{
stage=0
stop_stage=6
work_dir=exp/tedlium3              # archives/, TEDLIUM_release-3/, manifests/, runs/, plots/
data_dir=""                        # folder with a pre-downloaded TEDLIUM_release-3.tgz
corpus_dir=""                      # an extracted tree holding TEDLIUM_release-3/: stages 0-1 skipped
mirror=openslr                     # openslr | us | eu | cn | lium | any base URL (http, https, file://)
verify=true                        # false: skip checksum verification
checksums=""                       # md5sum/sha256sum list (path or URL) replacing the built-in digest
subset=legacy                      # legacy (452 h) | speaker-adaptation | full (= legacy, read from data/)
test_splits="dev test"             # evaluated: <split>, <split>_talks (full talks), <split>_long
longform_durations="[10,20,40,80,160]"   # seconds
pes="none sinusoidal relative rope cape"
experiment=cape_tedlium3           # conf/experiment/<name>.yaml
extra=""                           # extra Hydra overrides for train.py, e.g. "trainer.max_steps=2"
eval_extra=""                      # extra Hydra overrides for evaluate.py, e.g. "device=cuda"

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --*=*) name="${1%%=*}"; value="${1#*=}"; shift ;;
    --*) [ $# -ge 2 ] || { echo "$0: option $1 needs a value" >&2; exit 1; }
         name="$1"; value="$2"; shift 2 ;;
    *) echo "$0: unexpected argument '$1' (options are --name value)" >&2; exit 1 ;;
  esac
  name="${name#--}"; name="${name//-/_}"
  case "$name" in
    stage|stop_stage|work_dir|data_dir|corpus_dir|mirror|verify|checksums|subset|test_splits|\
    longform_durations|pes|experiment|extra|eval_extra) printf -v "$name" '%s' "$value" ;;
    *) echo "$0: unknown option --$name" >&2; usage >&2; exit 1 ;;
  esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo/recipes/python.sh"   # $PYTHON: set, or .venv/bin/python; checked
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$work_dir"
work_dir="$(cd "$work_dir" && pwd)"
archive_dir="$work_dir/archives"
manifest_dir="$work_dir/manifests"
runs_dir="$work_dir/runs"
if [ -n "$corpus_dir" ]; then corpus_dir="$(cd "$corpus_dir" && pwd)"; else corpus_dir="$archive_dir"; fi

log() { echo "$(date '+%F %T') [tedlium3] $*"; }
run_stage() { [ "$stage" -le "$1" ] && [ "$stop_stage" -ge "$1" ]; }
# Comma-joined, single-quoted Hydra list: ['a','b'] (paths may hold characters Hydra would parse).
hydra_list() { local out="" x; for x in "$@"; do out="$out${out:+,}'$x'"; done; echo "[$out]"; }
has_entries() { grep -q '[^[:space:]]' "$1" 2>/dev/null; }  # a manifest with at least one line
test_sets() {  # names of the segment, long-form and full-talk test manifests that exist
  local p s
  for p in $test_splits; do
    for s in "$p" "${p}_long" "${p}_talks"; do [ -f "$manifest_dir/$s.jsonl" ] && echo "$s"; done
  done
  return 0
}
check_test_sets() {  # an empty test manifest (interrupted or older run) is an error, never evaluated
  local s
  for s in "$@"; do
    has_entries "$manifest_dir/$s.jsonl" && continue
    echo "$0: $manifest_dir/$s.jsonl is empty; run --stage 2 --stop_stage 3 again (stage 2 prepares empty" \
      "or outdated manifests again, stage 3 rebuilds empty long-form sets)" >&2
    exit 1
  done
}

if run_stage 0; then
  if [ "$corpus_dir" != "$archive_dir" ]; then
    log "stage 0: skipped (--corpus_dir $corpus_dir given)"
  else
    log "stage 0: download TEDLIUM_release-3.tgz -> $archive_dir"
    done_marker="$archive_dir/.TEDLIUM_release-3.downloaded"
    if [ -f "$done_marker" ]; then
      log "  already downloaded"
    else
      args=(download --root "$archive_dir" --mirror "$mirror")
      [ -n "$data_dir" ] && args+=(--data_dir "$data_dir")
      [ "$verify" = true ] || args+=(--no_verify)
      [ -n "$checksums" ] && args+=(--checksums "$checksums")
      "$PYTHON" -m asr_pe.data.tedlium "${args[@]}"
      touch "$done_marker"
    fi
  fi
fi

if run_stage 1; then
  if [ "$corpus_dir" != "$archive_dir" ]; then
    log "stage 1: skipped (--corpus_dir $corpus_dir given)"
  else
    log "stage 1: extract into $archive_dir"
    "$PYTHON" -m asr_pe.data.tedlium extract --root "$archive_dir"
  fi
fi

if run_stage 2; then
  log "stage 2: manifests -> $manifest_dir"
  "$PYTHON" -m asr_pe.data.tedlium prepare --corpus_dir "$corpus_dir" --out_dir "$manifest_dir" \
    --subset "$subset"
fi

if run_stage 3; then
  log "stage 3: long-form test sets $longform_durations s"
  for part in $test_splits; do
    out="$manifest_dir/${part}_long.jsonl"
    if has_entries "$out"; then log "  $out exists"; continue; fi  # an empty one is built again
    "$PYTHON" "$repo/scripts/make_longform.py" in="$manifest_dir/$part.jsonl" out="$out" \
      durations="$longform_durations"
  done
fi

if run_stage 4; then
  log "stage 4: train pes=[$pes] experiment=$experiment"
  for pe in $pes; do
    run="$runs_dir/$pe"
    # eval/done.json: train.py writes it once every test set is scored; a run killed mid-evaluation
    # lacks it and is started again (resume=auto: training is complete, evaluation is redone)
    if [ -f "$run/eval/done.json" ]; then log "  $pe: done ($run/eval/done.json exists)"; continue; fi
    # shellcheck disable=SC2086  # $extra holds several overrides on purpose
    "$PYTHON" "$repo/train.py" experiment="$experiment" pe="$pe" run_dir="$run" resume=auto \
      data.corpus.manifest_dir="$manifest_dir" $extra
  done
fi

if run_stage 5; then
  mapfile -t sets < <(test_sets)
  [ "${#sets[@]}" -gt 0 ] || { echo "$0: stage 5: no test manifests in $manifest_dir (run stages 2-3)" >&2; exit 1; }
  check_test_sets "${sets[@]}"
  log "stage 5: evaluate on ${sets[*]}"
  for pe in $pes; do
    run="$runs_dir/$pe"
    [ -d "$run" ] || { echo "$0: stage 5: $run missing (run stage 4)" >&2; exit 1; }
    todo=()
    for s in "${sets[@]}"; do [ -f "$run/eval/$s/buckets.csv" ] || todo+=("$manifest_dir/$s.jsonl"); done
    if [ "${#todo[@]}" -eq 0 ]; then log "  $pe: all test sets evaluated"; continue; fi
    # shellcheck disable=SC2086
    "$PYTHON" "$repo/evaluate.py" run="$run" data.test="$(hydra_list "${todo[@]}")" $eval_extra
  done
fi

if run_stage 6; then
  mapfile -t sets < <(test_sets)
  check_test_sets "${sets[@]}"
  runs=()
  for pe in $pes; do runs+=("$runs_dir/$pe"); done
  for s in "${sets[@]}"; do
    log "stage 6: plot $s -> $work_dir/plots/$s"
    "$PYTHON" "$repo/scripts/plot_wer_vs_length.py" "${runs[@]}" --test-set "$s" --out "$work_dir/plots/$s"
  done
fi
log "stages $stage..$stop_stage done"
exit 0
}
