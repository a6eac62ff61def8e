#!/usr/bin/env bash
# LibriSpeech recipe of the WER-versus-length study (CAPE, Likhomanenko et al. 2021).
#
#   stage 0  download the OpenSLR-12 archives (resume + md5/sha256), or link --data_dir copies
#   stage 1  extract them (idempotent: marker file per archive)
#   stage 2  manifests <work_dir>/manifests/<part>.jsonl (skips existing ones)
#   stage 3  long-form test sets <set>_long.jsonl (consecutive utterances of one chapter)
#   stage 4  train one model per PE in $pes (skips runs whose evaluation is done); a part that is both
#            a training and a dev part (the smoke run's dev-clean) is split: chapters held out to validate
#   stage 5  evaluate every run on the short and long-form test sets (skips finished sets); writes the
#            in-context ratio of each long-form set (eval/<part>_long/in_context.md)
#   stage 6  WER (--metric cer: CER) vs length figures per test set across all runs, in-context table,
#            the natural utterances in 5 s bins (the CAPE paper's length figure); with --rate_axes
#            "tempo hop_ms", stage 5 decodes the natural sets on the paper's rate ladders and stage 6
#            draws them
#
# Usage: recipes/librispeech/run.sh [--stage N] [--stop_stage M] [--name value ...]
# Every variable below can be set with --name value (or --name=value); see README.md.
# First run: --smoke (a small model in minutes, cape_librispeech_smoke: dev-clean only, 10 % of its
# chapters held out for validation, its own work_dir).
set -euo pipefail
# The body is one { ... } block, read in full before it runs: editing this file while a long job
# is under way cannot make the running copy execute a mix of old and new lines. Stages 3-6 and the
# option parsing are shared with the other corpus recipes: recipes/lib/stages.sh.
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
metric=wer                         # stage 6: wer | cer
heldout_fraction=0.1               # stage 4: chapters held out of a part that is both a train and a dev part
rate_axes=""                       # stages 5-6: "tempo", "hop_ms" or both: the CAPE paper's rate ladders
# stage 6: said under the CAPE paper's figures (natural 5 s bins, rate ladders)
corpus_note="Here: LibriSpeech, in place of the paper's WSJ (licensed), and no TED-LIUM 3 (recipes/tedlium3)."
smoke=false                        # --smoke: the smoke run below (any option given still wins)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo/recipes/lib/stages.sh"
if smoke_requested "$@"; then
  # minutes, not weeks: a ~0.7 M-parameter model (conf/experiment/cape_librispeech_smoke.yaml)
  # trained on dev-clean alone (337 MB; stage 4 holds 10 % of its chapters out for validation:
  # dev-clean_fit / dev-clean_heldout), tested on test-clean, in a work_dir of its own so that
  # no smoke run is ever taken for a finished run of the study
  work_dir=exp/librispeech_smoke
  experiment=cape_librispeech_smoke
  train_parts=dev-clean
  dev_parts=dev-clean
  test_parts=test-clean
  pes="none cape"
fi
parse_options train_parts dev_parts test_parts -- "$@"
recipe_setup librispeech
all_parts="$(echo $train_parts $dev_parts $test_parts | tr ' ' '\n' | awk 'NF && !seen[$0]++' | tr '\n' ' ')"
test_sets() { existing_sets "$test_parts" "" _long; }  # short and long-form test manifests that exist

if run_stage 0 && needs_archives 0; then
  log "stage 0: download $all_parts -> $archive_dir"
  for part in $all_parts; do
    if downloaded "$part"; then log "  $part: already downloaded"; continue; fi
    download_archive "$part" asr_pe.data.librispeech --parts "$part"
  done
fi

if run_stage 1 && needs_archives 1; then
  log "stage 1: extract into $archive_dir"
  # shellcheck disable=SC2086
  run_child "$PYTHON" -m asr_pe.data.librispeech extract --root "$archive_dir" --parts $all_parts
fi

if run_stage 2; then
  log "stage 2: manifests -> $manifest_dir"
  # shellcheck disable=SC2086
  run_child "$PYTHON" -m asr_pe.data.librispeech prepare --corpus-dir "$corpus_dir" --out-dir "$manifest_dir" \
    --parts $all_parts
fi

if run_stage 3; then stage_longform $test_parts; fi
if run_stage 4; then
  heldout_split "$train_parts" "$dev_parts"   # a part both trained and validated on: split (the smoke run)
  # shellcheck disable=SC2086  # the part lists split into words on purpose
  stage_train data.corpus.train="$(hydra_list $fit_parts)" data.corpus.dev="$(hydra_list $val_parts)" \
    data.corpus.test="$(hydra_list $test_parts)"
fi
if run_stage 5; then stage_evaluate; fi
if run_stage 6; then stage_plot; fi
log "stages $stage..$stop_stage done"
exit 0
}
