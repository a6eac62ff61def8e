"""Evaluate one run on the length ladder: the plain decoding on the dev and test pools, inference
settings chosen on dev, the chosen one decoded on test once.

`evaluate_ladder` decodes every set of the chosen pools with
`asr_pe.evaluation.pipeline.evaluate_run` (``data.test`` = the ladder's manifests, so the result
folders are ``eval/<set><suffix>``; ``corpus_manifests`` locates the run's corpus as there), then per candidate setting
(an ``eval.remedy`` such as ``window:5`` or ``rope_ntk``, one with the training length it scales by
such as ``rope_yarn@10``, or ``chunked:<chunk_s>:<overlap_s>``)
decodes the dev pool only; the candidate (or the plain decoding) with the lowest dev CER on the
recordings of ``select_variant`` at least ``select_min_rung`` seconds long, decoded whole, is then
decoded on the test pool. It writes ``eval/ladder/report.md`` (the dose-response tables: dev plain,
test plain, and test with the chosen setting) and ``eval/ladder/choice.json`` (every candidate's dev
rate, the choice and the rule), atomically.

It resumes and extends: a set's result folder that is complete and records the checkpoint bytes
and settings it would be decoded with now is reused, not decoded again (`asr_pe.evaluation.reuse`),
so a second call with one more candidate decodes only that candidate's dev sets (and the test
pool if it is chosen), and a call killed half-way loses only the set it was decoding. Each set
logs whether it was decoded or reused (and why), the end ``decoded N sets, reused M``.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Sequence

from asr_pe.data.synth.ladder import ladder_sets
from asr_pe.evaluation.in_context import number
from asr_pe.evaluation.ladder_report import choose_on_dev, dose_response_table, pool_sets, run_ladder, whole_rate
from asr_pe.inference.remedies import parse_remedies, remedy_suffix
from asr_pe.evaluation.pipeline import CorpusManifests, evaluate_run
from asr_pe.evaluation.reuse import Reuse
from asr_pe.evaluation.settings import EvalSettingsError
from asr_pe.io import atomic_write_json, atomic_write_text
from asr_pe.run_folder import ladder_dir as ladder_results_dir

__all__ = ["candidate_settings", "evaluate_ladder"]

log = logging.getLogger(__name__)
PLAIN = ""


def candidate_settings(candidate: str) -> dict[str, Any]:
    """``eval`` overrides of a candidate: ``chunked:<chunk_s>:<overlap_s>`` (suffix
    ``_chunked<chunk>o<overlap>``), an ``eval.remedy`` string (its own suffix), or one followed by
    ``@<seconds>``: the training length the remedy scales by (``eval.train_length_s``; for the RoPE
    rescalings it sets the NTK / YaRN / PI factor = input length / that length), e.g.
    ``rope_ntk@10`` (suffix ``_rope_ntk_t10``)."""
    remedy, at, length = candidate.partition("@")
    if at:
        try:
            seconds = float(length)
        except ValueError:
            seconds = math.nan
        if not seconds > 0:
            raise EvalSettingsError(f"candidate {candidate!r}: expected <remedy>@<training length in seconds > 0>")
        label = remedy_suffix(parse_remedies(remedy))
        return {"remedy": remedy, "train_length_s": seconds,
                "suffix": f"{label}_t{seconds:g}".replace(".", "p")}
    if candidate.startswith("chunked"):
        try:
            _, chunk, overlap = candidate.split(":")
            chunk_s, overlap_s = float(chunk), float(overlap)
        except ValueError:
            raise EvalSettingsError(f"candidate {candidate!r}: expected chunked:<chunk_s>:<overlap_s>") from None
        return {"mode": "chunked", "chunk_s": chunk_s, "overlap_s": overlap_s,
                "suffix": f"_chunked{chunk_s:g}o{overlap_s:g}"}
    return {"remedy": candidate}


def _manifests(index: dict, pool: str) -> list[str]:
    alone, sets = pool_sets(index, pool)
    return [alone] + [sets[k] for k in sorted(sets)]


def _evaluate(run_dir: Path, manifests: list[str], settings: dict, device: str | None,
              corpus_manifests: CorpusManifests, reuse: Reuse) -> str:
    """Decode ``manifests`` with the ``eval`` settings; returns the suffix of the result folders."""
    results = evaluate_run(run_dir, {"data": {"test": manifests}, "eval": settings}, device=device,
                           corpus_manifests=corpus_manifests, reuse=reuse)
    alone = Path(manifests[0]).stem
    key = next(k for k in results if k.startswith(alone))
    return key[len(alone):]


def evaluate_ladder(run_dir: str | Path, ladder_dir: str | Path, *, corpus_manifests: CorpusManifests,
                    candidates: Sequence[str] = (),
                    select_variant: str = "nogap", select_min_rung: float = 0.0, device: str | None = None,
                    n_boot: int = 1000, checkpoint: str | None = None, reuse: bool = True) -> dict[str, Any]:
    """See the module docstring; returns the content of ``choice.json``. ``reuse=False`` decodes
    every set even where its result could be reused."""
    run_dir = Path(run_dir)
    index = ladder_sets(ladder_dir)
    for pool in ("dev", "test"):
        pool_sets(index, pool)                     # both pools must exist before anything is decoded
    variants = {v for v, _ in pool_sets(index, "dev")[1]}
    if select_variant not in variants:
        raise EvalSettingsError(f"select_variant {select_variant!r} is not a variant of the ladder ({sorted(variants)})")
    settings = {"n_boot": n_boot, **({"checkpoint": checkpoint} if checkpoint else {})}
    for c in candidates:
        candidate_settings(c)                      # a bad candidate stops before the first decoding
    tally = Reuse(enabled=reuse)
    _evaluate(run_dir, _manifests(index, "dev") + _manifests(index, "test"), settings, device, corpus_manifests,
              tally)
    dev = {PLAIN: run_ladder(run_dir, index, "dev", n_boot=n_boot)}
    test_plain = run_ladder(run_dir, index, "test", n_boot=n_boot)
    suffixes = {PLAIN: ""}
    for c in candidates:
        suffixes[c] = _evaluate(run_dir, _manifests(index, "dev"), {**settings, **candidate_settings(c)}, device,
                                corpus_manifests, tally)
        dev[c] = run_ladder(run_dir, index, "dev", suffix=suffixes[c], n_boot=n_boot)
    chosen, rates = choose_on_dev(dev, variant=select_variant, min_rung=select_min_rung)
    report = [f"# Length ladder: {run_dir.name}\n",
              f"## dev pool, plain decoding\n\n{dose_response_table(dev[PLAIN])}",
              f"## test pool, plain decoding\n\n{dose_response_table(test_plain)}"]
    test_chosen_rate = math.nan
    if chosen != PLAIN:
        suffix = _evaluate(run_dir, _manifests(index, "test"), {**settings, **candidate_settings(chosen)}, device,
                           corpus_manifests, tally)
        test_chosen = run_ladder(run_dir, index, "test", suffix=suffix, n_boot=n_boot)
        test_chosen_rate = whole_rate(test_chosen, variant=select_variant, min_rung=select_min_rung)
        report.append(f"## test pool, {chosen} (chosen on dev)\n\n{dose_response_table(test_chosen)}")
    rule = (f"lowest dev CER of the {select_variant} recordings of rungs >= {select_min_rung:g} s decoded "
            f"whole, among the plain decoding and {len(candidates)} candidate(s)")
    choice = {"run": str(run_dir), "ladder": str(ladder_dir), "rule": rule,
              "dev_rates": {(c or "plain"): number(rates[c]) for c in dev}, "chosen": chosen or "plain",
              "test_rate_plain": number(whole_rate(test_plain, variant=select_variant, min_rung=select_min_rung)),
              "test_rate_chosen": number(test_chosen_rate)}
    report.append("## choice\n\n" + f"Rule: {rule}.\n\n| setting | dev CER (%) |\n| --- | ---: |\n"
                  + "".join(f"| {c or 'plain'} | {rates[c]:.2f} |\n" for c in dev)
                  + f"\nChosen: **{chosen or 'plain'}**; decoded on test once.\n")
    out = ladder_results_dir(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "report.md", "\n".join(report))
    atomic_write_json(out / "choice.json", choice, indent=1)
    log.info("ladder: %s", tally.summary())
    log.info("ladder: %s chosen on dev; report in %s", chosen or "plain", out / "report.md")
    return choice
