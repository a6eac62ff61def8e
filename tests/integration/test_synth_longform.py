"""The synth corpus' long-form set: one speaker per recording, transcripts joined in order."""

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from asr_pe.data.manifest import read_manifest
from asr_pe.data.synth import prepare_synth

from e2e_helpers import TINY_SYNTH


def test_synth_longform_from_test_split(tiny_synth_root):
    paths = prepare_synth(root=tiny_synth_root, progress=False, longform={"durations": [8], "gap_s": 0.5},
                          **TINY_SYNTH)
    assert set(paths["test"]) == {"test", "longform"}
    test = {u.id: u for u in read_manifest(paths["test"]["test"])}
    long = read_manifest(paths["test"]["longform"])
    assert long, "no long-form recording was built"
    sources = json.loads((Path(paths["test"]["longform"]).parent / "sources.json").read_text())
    for rec in long:
        parts = [test[i] for i in sources[rec.id]]
        assert {p.speaker for p in parts} == {rec.speaker}
        assert rec.text == " ".join(p.text for p in parts)
        assert abs(rec.duration - (sum(p.duration for p in parts) + 0.5 * (len(parts) - 1))) < 0.05
        assert 8 * 0.85 <= rec.duration <= 8 * 1.15
        # the synthetic audio's pauses are digital silence, so its joins stay exact zeros (the
        # long-form sets of the study are byte-identical to those built before joins took the
        # sources' background)
        wave, rate = sf.read(rec.audio_filepath, dtype="int16")
        pos = 0
        for k, p in enumerate(parts):
            if k:
                assert not np.any(wave[pos:pos + rate // 2]), f"{rec.id}: join {k} is not digital silence"
                pos += rate // 2
            pos += int(round(p.duration * rate))
        assert pos == len(wave)
    # cached: a second call returns the same manifest without rebuilding
    again = prepare_synth(root=tiny_synth_root, progress=False, longform={"durations": [8], "gap_s": 0.5},
                          **TINY_SYNTH)
    assert again == paths


def test_concurrent_jobs_build_the_long_form_set_once(tiny_synth_root, monkeypatch):
    """Sweep jobs starting together (a SLURM array) must not write the same files at once."""
    import threading
    import time

    import asr_pe.data.longform_sets as longform
    from asr_pe.data.synth.corpus import build_synth_longform

    corpus_dir = next(Path(tiny_synth_root).glob("synth/*/"))
    calls = []
    real = longform.build_longform

    def slow_build(*args, **kwargs):
        calls.append(threading.get_ident())
        time.sleep(0.3)  # the other job arrives while this one builds
        return real(*args, **kwargs)

    monkeypatch.setattr(longform, "build_longform", slow_build)
    results = []
    jobs = [threading.Thread(target=lambda: results.append(build_synth_longform(corpus_dir, durations=[7])))
            for _ in range(2)]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(30)
    assert len(calls) == 1 and len(results) == 2 and results[0] == results[1]
    assert read_manifest(results[0]), "the long-form set is empty"
