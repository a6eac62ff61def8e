#!/usr/bin/env bash
# TED-LIUM 3 recipe of the WER-versus-length study (CAPE, Likhomanenko et al. 2021).
#
#   stage 0  download TEDLIUM_release-3.tgz from OpenSLR 51 (resume + sha256), or link --data_dir
#   stage 1  extract it (idempotent: marker file)
#   stage 2  manifests <work_dir>/manifests/<split>.jsonl + <split>_talks.jsonl (full talks)
#   stage 3  long-form test sets <split>_long.jsonl (consecutive segments of one talk)
#   stage 4  train one model per PE in $pes (skips runs whose evaluation is done); a split both trained
#            and validated on (the smoke run's dev) is split: talks held out to validate
#   stage 5  evaluate every run on the segment, long-form and full-talk sets (skips finished sets);
#            writes the in-context ratio of <split>_long and <split>_talks (eval/<set>/in_context.md)
#   stage 6  WER (--metric cer: CER) vs length figures per test set across all runs, in-context table,
#            the natural utterances in 5 s bins (the CAPE paper's length figure); with --rate_axes
#            "tempo hop_ms", stage 5 decodes the natural sets on the paper's rate ladders and stage 6
#            draws them
#
# Usage: recipes/tedlium3/run.sh [--stage N] [--stop_stage M] [--name value ...]
# Every variable below can be set with --name value (or --name=value); see README.md.
# First run: --smoke (a small model in minutes, cape_tedlium3_smoke: the dev talks only, one of them held
# out for validation, its own work_dir).
set -euo pipefail
# The body is one { ... } block, read in full before it runs: editing this file while a long job
# is under way cannot make the running copy execute a mix of old and new lines. Stages 3-6 and the
# option parsing are shared with the other corpus recipes: recipes/lib/stages.sh.
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
train_splits="train"               # trained on
dev_splits="dev"                   # validated on (a split also in train_splits: its held-out talks)
test_splits="dev test"             # evaluated: <split>, <split>_talks (full talks), <split>_long
longform_durations="[10,20,40,80,160]"   # seconds
pes="none sinusoidal relative rope cape"
experiment=cape_tedlium3           # conf/experiment/<name>.yaml
extra=""                           # extra Hydra overrides for train.py, e.g. "trainer.max_steps=2"
eval_extra=""                      # extra Hydra overrides for evaluate.py, e.g. "device=cuda"
metric=wer                         # stage 6: wer | cer
heldout_fraction=0.1               # stage 4: talks held out of a split both trained and validated on
rate_axes=""                       # stages 5-6: "tempo", "hop_ms" or both: the CAPE paper's rate ladders
# stage 6: said under the CAPE paper's figures (natural 5 s bins, rate ladders)
corpus_note="Here: TED-LIUM 3, as in the paper (its WSJ is licensed; recipes/librispeech stands in)."
smoke=false                        # --smoke: the smoke run below (any option given still wins)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo/recipes/lib/stages.sh"
if smoke_requested "$@"; then
  # minutes, not weeks: a ~0.7 M-parameter model (conf/experiment/cape_tedlium3_smoke.yaml)
  # trained on 7 of the 8 dev talks (1.6 h; stage 4 holds one out for validation: dev_fit /
  # dev_heldout), tested on the 11 test talks, in a work_dir of its own so that no smoke run is
  # ever taken for a finished run of the study
  work_dir=exp/tedlium3_smoke
  experiment=cape_tedlium3_smoke
  train_splits=dev
  dev_splits=dev
  test_splits=test
  pes="none cape"
fi
parse_options subset train_splits dev_splits test_splits -- "$@"
recipe_setup tedlium3
test_sets() { existing_sets "$test_splits" "" _long _talks; }  # segment, long-form and full-talk sets
longform_done() { has_entries "$1"; }  # stage 3 builds an empty long-form set again
check_test_sets() {  # an empty test manifest (interrupted or older run) is an error, never evaluated
  local s
  for s in "$@"; do
    has_entries "$manifest_dir/$s.jsonl" && continue
    echo "$0: $manifest_dir/$s.jsonl is empty; run --stage 2 --stop_stage 3 again (stage 2 prepares empty" \
      "or outdated manifests again, stage 3 rebuilds empty long-form sets)" >&2
    exit 1
  done
}

if run_stage 0 && needs_archives 0; then
  log "stage 0: download TEDLIUM_release-3.tgz -> $archive_dir"
  if downloaded TEDLIUM_release-3; then
    log "  already downloaded"
  else
    download_archive TEDLIUM_release-3 asr_pe.data.tedlium
  fi
fi

if run_stage 1 && needs_archives 1; then
  log "stage 1: extract into $archive_dir"
  run_child "$PYTHON" -m asr_pe.data.tedlium extract --root "$archive_dir"
fi

if run_stage 2; then
  log "stage 2: manifests -> $manifest_dir"
  run_child "$PYTHON" -m asr_pe.data.tedlium prepare --corpus-dir "$corpus_dir" --out-dir "$manifest_dir" \
    --subset "$subset"
fi

if run_stage 3; then stage_longform $test_splits; fi
# the evaluation that follows training scores the segment and whole-talk sets of $test_splits
# (stage 5 adds the long-form ones), not the config's default list
# shellcheck disable=SC2046,SC2086  # one word per set on purpose
if run_stage 4; then
  heldout_split "$train_splits" "$dev_splits"   # a split both trained and validated on: split (the smoke run)
  stage_train data.corpus.train="$(hydra_list $fit_parts)" data.corpus.dev="$(hydra_list $val_parts)" \
    data.corpus.test="$(hydra_list $(for s in $test_splits; do echo "$s" "${s}_talks"; done))"
fi
if run_stage 5; then stage_evaluate; fi
if run_stage 6; then stage_plot; fi
log "stages $stage..$stop_stage done"
exit 0
}
