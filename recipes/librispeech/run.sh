#!/usr/bin/env bash
# LibriSpeech recipe of the WER-versus-length study (CAPE, Likhomanenko et al. 2021).
#
#   stage 0  download the OpenSLR-12 archives (resume + md5/sha256), or link --data_dir copies
#   stage 1  extract them (idempotent: marker file per archive)
#   stage 2  manifests <work_dir>/manifests/<part>.jsonl (skips existing ones)
#   stage 3  long-form test sets <set>_long.jsonl (consecutive utterances of one chapter)
#   stage 4  train one model per PE in $pes (skips runs whose evaluation is done)
#   stage 5  evaluate every run on the short and long-form test sets (skips finished sets)
#   stage 6  WER-vs-length figures, one per test set, across all runs
#
# Usage: recipes/librispeech/run.sh [--stage N] [--stop_stage M] [--name value ...]
# Every variable below can be set with --name value (or --name=value); see README.md.
set -euo pipefail
# The body is one { ... } block, read in full before it runs: editing this file while a long job
# is under way cannot make the running copy execute a mix of old and new lines.
{
stage=0
stop_stage=6
work_dir=exp/librispeech           # archives/, LibriSpeech/, manifests/, runs/, plots/
data_dir=""                        # folder with pre-downloaded <part>.tar.gz (stage 0 links them)
corpus_dir=""                      # an extracted tree holding LibriSpeech/: stages 0-1 are skipped
mirror=openslr                     # openslr | us | eu | cn | any base URL (http, https, file://)
verify=true                        # false: skip checksum verification
checksums=""                       # md5sum/sha256sum list (path or URL) replacing the built-in digests
train_parts="train-clean-100 train-clean-360 train-other-500"
dev_parts="dev-clean dev-other"
test_parts="test-clean test-other"
longform_durations="[10,20,40,80,160]"   # seconds; add "full" for whole chapters
pes="none sinusoidal relative rope cape"
experiment=cape_librispeech        # conf/experiment/<name>.yaml
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
    stage|stop_stage|work_dir|data_dir|corpus_dir|mirror|verify|checksums|train_parts|dev_parts|test_parts|\
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
all_parts="$(echo $train_parts $dev_parts $test_parts | tr ' ' '\n' | awk 'NF && !seen[$0]++' | tr '\n' ' ')"
if [ -n "$corpus_dir" ]; then corpus_dir="$(cd "$corpus_dir" && pwd)"; else corpus_dir="$archive_dir"; fi

log() { echo "$(date '+%F %T') [librispeech] $*"; }
run_stage() { [ "$stage" -le "$1" ] && [ "$stop_stage" -ge "$1" ]; }
# Comma-joined, single-quoted Hydra list: ['a','b'] (paths may hold characters Hydra would parse).
hydra_list() { local out="" x; for x in "$@"; do out="$out${out:+,}'$x'"; done; echo "[$out]"; }
test_sets() {  # names of the short and long-form test manifests that exist
  local p
  for p in $test_parts; do
    [ -f "$manifest_dir/$p.jsonl" ] && echo "$p"
    [ -f "$manifest_dir/${p}_long.jsonl" ] && echo "${p}_long"
  done
  return 0
}

if run_stage 0; then
  if [ "$corpus_dir" != "$archive_dir" ]; then
    log "stage 0: skipped (--corpus_dir $corpus_dir given)"
  else
    log "stage 0: download $all_parts -> $archive_dir"
    for part in $all_parts; do
      done_marker="$archive_dir/.$part.downloaded"
      if [ -f "$done_marker" ]; then log "  $part: already downloaded"; continue; fi
      args=(download --root "$archive_dir" --parts "$part" --mirror "$mirror")
      [ -n "$data_dir" ] && args+=(--data_dir "$data_dir")
      [ "$verify" = true ] || args+=(--no_verify)
      [ -n "$checksums" ] && args+=(--checksums "$checksums")
      "$PYTHON" -m asr_pe.data.librispeech "${args[@]}"
      touch "$done_marker"
    done
  fi
fi

if run_stage 1; then
  if [ "$corpus_dir" != "$archive_dir" ]; then
    log "stage 1: skipped (--corpus_dir $corpus_dir given)"
  else
    log "stage 1: extract into $archive_dir"
    # shellcheck disable=SC2086
    "$PYTHON" -m asr_pe.data.librispeech extract --root "$archive_dir" --parts $all_parts
  fi
fi

if run_stage 2; then
  log "stage 2: manifests -> $manifest_dir"
  # shellcheck disable=SC2086
  "$PYTHON" -m asr_pe.data.librispeech prepare --corpus_dir "$corpus_dir" --out_dir "$manifest_dir" \
    --parts $all_parts
fi

if run_stage 3; then
  log "stage 3: long-form test sets $longform_durations s"
  for part in $test_parts; do
    out="$manifest_dir/${part}_long.jsonl"
    if [ -f "$out" ]; then log "  $out exists"; continue; fi
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
    # shellcheck disable=SC2086  # $extra and the part lists split into words on purpose
    "$PYTHON" "$repo/train.py" experiment="$experiment" pe="$pe" run_dir="$run" resume=auto \
      data.corpus.manifest_dir="$manifest_dir" data.corpus.train="$(hydra_list $train_parts)" \
      data.corpus.dev="$(hydra_list $dev_parts)" data.corpus.test="$(hydra_list $test_parts)" $extra
  done
fi

if run_stage 5; then
  mapfile -t sets < <(test_sets)
  [ "${#sets[@]}" -gt 0 ] || { echo "$0: stage 5: no test manifests in $manifest_dir (run stages 2-3)" >&2; exit 1; }
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
