"""Every number of recipes/synth/study/natural_bins/README.md (issue 45 points 1 and 5: the CAPE
paper's length figure on the embedded corpus), computed again from the archived study runs
(recipes/synth/study/runs/) with the figure's own code, `asr_pe.plots.natural_bins.natural_bins`
(its bootstrap seeds, 1000 resamples). recipes/synth/claims.py adds `NATURAL_BINS_DOCUMENTS` to
its DOCUMENTS; ``python recipes/synth/claims_natural_bins.py`` prints what disagrees.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

from asr_pe.plots.natural_bins import natural_bins
from asr_pe.plots.results_claims import Claim, Fact, check_claims

STUDY = Path(__file__).resolve().parent / "study"
README = STUDY / "natural_bins" / "README.md"
FIRST, LAST = "0-5", "60-65"
CTC_PES = ("alibi", "cape", "conv", "learned_wrap", "none", "relative", "rem", "rope", "shaw", "sinusoidal",
           "sinusoidal_sqrtd", "t5")


@lru_cache(maxsize=1)
def _bins():
    return natural_bins([STUDY / "runs"], "test", n_boot=1000)


def _cell(label: str, bin_label: str, metric: str = "cer") -> tuple[float, float, float]:
    """(value, CI low, CI high) of a label's bin, in %."""
    series = next(s for s in _bins().series[metric] if s.label == label)
    return series.value[bin_label], series.ci_low[bin_label], series.ci_high[bin_label]


def _bins_labels() -> list[str]:
    return list(_bins().series["cer"][0].buckets)


def _count(bin_label: str) -> int:
    return max(u.get(bin_label, 0) for u in _bins().utterances.values())


def _hybrid(bin_label: str) -> list[float]:
    return [_cell(s.label, bin_label)[0] for s in _bins().series["cer"] if s.label.endswith("/hybrid+attention")]


def _only_rope_grows(_d) -> list[str]:
    """RoPE's 60-65 s interval lies above its 0-5 s interval; every other CTC model's two overlap."""
    out = []
    for pe in CTC_PES:
        (_, lo0, hi0), (_, lo1, hi1) = _cell(f"{pe}/ctc", FIRST), _cell(f"{pe}/ctc", LAST)
        grows = lo1 > hi0
        if grows != (pe == "rope"):
            out.append(f"{pe}: 0-5 s [{lo0:.1f}, {hi0:.1f}], 60-65 s [{lo1:.1f}, {hi1:.1f}]")
    return out


def _durations(_d) -> tuple[float, float]:
    """The shortest and longest test utterance (s), from the bins' mean durations' runs."""
    from asr_pe.evaluation.in_context import read_records
    from asr_pe.run_folder import PER_UTT, result_dir

    run = _bins().runs[0]
    durations = [r["duration"] for r in read_records(result_dir(run.run_dir, "test") / PER_UTT)]
    return min(durations), max(durations)


def _past_30(_d) -> tuple[int, int]:
    counts = [_count(b) for b in _bins_labels() if b != "all" and float(b.split("-")[0]) >= 30]
    return min(counts), max(counts)


NATURAL_BINS_CLAIMS = [
    Fact("only RoPE's CER grows (CTC)", "Among the CTC models only RoPE's CER grows with length", _only_rope_grows),
    Claim("RoPE 0-5 / 60-65", "{} % [{}, {}] at 0-5 s against {} % [{}, {}] at 60-65 s",
          lambda d: (*_cell("rope/ctc", FIRST), *_cell("rope/ctc", LAST))),
    Claim("relative 0-5 / 60-65", "relative stays at {} % [{}, {}] against {} % [{}, {}]",
          lambda d: (*_cell("relative/ctc", FIRST), *_cell("relative/ctc", LAST))),
    Claim("attention decoders at 60-65 / 0-5", "{}-{} % CER at 60-65 s, against {}-{} % at 0-5 s",
          lambda d: (min(_hybrid(LAST)), max(_hybrid(LAST)), min(_hybrid(FIRST)), max(_hybrid(FIRST)))),
    Claim("utterances past 30 s", "The bins past 30 s hold {}-{} utterances each", _past_30),
    Claim("utterances 0-5 / 60-65", "{} utterances at 0-5 s, {} at 60-65 s", lambda d: (_count(FIRST), _count(LAST))),
    Claim("test set size", "The test set has {} utterances, {} per doubling bucket",
          lambda d: (_count("all"), _count("all") / 6)),
    Claim("durations", "150 test utterances of {}-{} s", _durations),
]
NATURAL_BINS_DOCUMENTS = {README: NATURAL_BINS_CLAIMS}
# what recipes/synth/RESULTS.md says of the figure (claims.py adds them to its CLAIMS)
NATURAL_BINS_RESULTS_CLAIMS = [
    Fact("RESULTS: only RoPE's CER grows (CTC)", "only RoPE's CER grows among the CTC models", _only_rope_grows),
    Claim("RESULTS: RoPE 0-5 / 60-65", "{} % at 0-5 s against {} % at 60-65 s",
          lambda d: (_cell("rope/ctc", FIRST)[0], _cell("rope/ctc", LAST)[0])),
]


def main() -> int:
    failures = check_claims(README.read_text(), NATURAL_BINS_CLAIMS, None)
    for f in failures:
        print(f"{f.name}: {f.message}")
    print(f"{len(NATURAL_BINS_CLAIMS) - len(failures)} of {len(NATURAL_BINS_CLAIMS)} claims agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
