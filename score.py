"""Score any system's transcripts of a test set by input length, like ``evaluate.py`` scores a run.

    python score.py --manifest exp/tedlium3/manifests/test_long.jsonl --hyp whisper/test_long.jsonl \\
        --out exp/tedlium3/external/whisper [--format auto|jsonl|text|ctm] [--text-key pred_text] \\
        [--label NAME] [--missing error|empty] [--extra error|ignore] [--channel A] [--n-boot 1000] [--no-plot] \\
        [--normalizer whisper_english|whisper_basic]

Writes <out>/eval/<test set>/{per_utt.jsonl,buckets.csv,buckets.md,buckets.meta.json}, what reviewers
inspect (alignments.pra: sclite-style per-utterance alignments; speakers.{csv,md}: per-speaker scores)
and what sclite and meeteval read (ref.stm, hyp.stm, ref.trn, hyp.trn, ref_recordings.stm), and
<out>/run_info.json, so scripts/plot_wer_vs_length.py plots <out> beside the recipe's runs, and
(unless --no-plot) <out>/plots/<test set>/wer_vs_length.{png,csv,md}. A long-form set whose
manifest records its recordings' parts, scored after the set holding those parts, also gets
<out>/eval/<long set>/in_context.{json,md} (the in-context ratio). Hypothesis formats, id
checks and CTM handling: asr_pe/evaluation/external_scoring.py.

<out> is the system's own folder: a trained run's folder (config.yaml, checkpoints/) or any folder
whose run_info.json score.py did not write is refused (one error line, exit 2, nothing written),
since its run_info.json and eval/ results would be replaced.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from asr_pe.data.manifest import ManifestError
from asr_pe.evaluation.buckets import DOUBLING, format_table
from asr_pe.errors import UserError
from asr_pe.evaluation.external_scoring import FORMATS, NORMALIZERS, HypothesisError, score_hypotheses


def _edges(text: str):
    if text.strip().lower() == DOUBLING:
        return DOUBLING
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give '{DOUBLING}' or comma-separated seconds") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="score.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True, help="the test manifest the system decoded (references, ids)")
    parser.add_argument("--hyp", required=True, help="hypothesis file: JSONL (id, text), Kaldi text, or CTM")
    parser.add_argument("--out", required=True, help="the system's folder (results go to <out>/eval/<test set>)")
    parser.add_argument("--format", choices=("auto", *FORMATS), default="auto",
                        help="auto: from the file name (.jsonl/.json, .ctm, text/.txt)")
    parser.add_argument("--text-key", default=None,
                        help="JSONL key of the hypothesis (default text; NeMo's output: pred_text)")
    parser.add_argument("--test-set", default=None, help="name of the set (default: the manifest's name)")
    parser.add_argument("--label", default=None, help="the system's name in tables and plots (default: <out>'s name)")
    parser.add_argument("--missing", choices=("error", "empty"), default="error",
                        help="an utterance without a hypothesis: an error, or scored as empty (all deletions)")
    parser.add_argument("--extra", choices=("error", "ignore"), default="error",
                        help="a hypothesis id not in the manifest: an error, or ignored (a file of several sets)")
    parser.add_argument("--channel", default=None,
                        help="CTM only: score the words of this channel (e.g. A) and leave the others out; without "
                             "it a recording with words on two channels is an error")
    parser.add_argument("--edges", type=_edges, default=DOUBLING,
                        help=f"bucket edges: {DOUBLING} (0, 2, 4, 8, ... s, as evaluate.py) or e.g. 0,5,10,20")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap draws per bucket (as evaluate.py)")
    parser.add_argument("--train-max-duration", type=float, default=None,
                        help="the system's longest training input (s), if known: the plots' reference bucket")
    parser.add_argument("--normalizer", choices=sorted(NORMALIZERS), default=None,
                        help="normalise references and hypotheses alike before scoring (a foreign system's cased, "
                             "punctuated output; whisper_english: Whisper's English normaliser, from the "
                             "whisper-normalizer package: pip install -e '.[normalize]'); default: none, as for "
                             "our runs; recorded in buckets.meta.json")
    parser.add_argument("--no-plot", action="store_true", help="skip <out>/plots/<test set>/")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.n_boot < 0:
        parser.error(f"--n-boot {args.n_boot}: must be >= 0")
    try:
        rows, folder = score_hypotheses(
            args.manifest, args.hyp, args.out, fmt=args.format, text_key=args.text_key, test_set=args.test_set,
            label=args.label, edges=args.edges, n_boot=args.n_boot, missing=args.missing, extra=args.extra,
            train_max_duration=args.train_max_duration, channel=args.channel, normalizer=args.normalizer)
    except (UserError, HypothesisError, ManifestError, FileNotFoundError, ValueError) as e:
        if os.environ.get("ASR_PE_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"[asr_pe] {folder.name}: {args.hyp}")
    print(format_table(rows))
    print(f"written: {folder}/per_utt.jsonl, buckets.csv, buckets.md")
    if not args.no_plot:
        from asr_pe.plots.wer_vs_length import make_report  # matplotlib: only when plotting

        files = make_report([args.out], Path(args.out) / "plots" / folder.name, test_set=folder.name)
        print(f"plot: {files['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
