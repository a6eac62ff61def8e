"""asr_pe/data/heldout.py and scripts/split_heldout.py: whole groups held out, spread over the
manifest, never none and never all; the two shares partition the manifest in its order."""

import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe.data.heldout import HeldoutError, heldout_groups, split_heldout
from asr_pe.data.manifest import Utterance, read_manifest, write_manifest

REPO = Path(__file__).resolve().parents[2]


def utts(groups: dict[str, int], audio: Path = Path("/a")) -> list[Utterance]:
    return [Utterance(id=f"{g}-{k:04d}", audio_filepath=str(audio / f"{g}-{k}.flac"), duration=1.0 + k, text="a b",
                      speaker=g) for g, n in groups.items() for k in range(n)]


def test_the_held_out_groups_are_a_fraction_spread_over_the_order():
    names = [f"g{i:02d}" for i in range(97)]             # dev-clean: 97 chapters
    held = heldout_groups(names, 0.1)
    assert len(held) == 10 and len(set(held)) == 10
    gaps = [int(b[1:]) - int(a[1:]) for a, b in zip(held, held[1:])]
    assert min(gaps) >= 9 and max(gaps) <= 11              # evenly spaced, not the first or last ten
    assert heldout_groups(["a", "b", "c"], 0.1) == ["c"]    # at least one
    assert heldout_groups(["a", "b"], 0.1) == ["b"]
    assert heldout_groups(list("abcdefgh"), 0.1) == ["e"]  # TED-LIUM dev: 8 talks, the fifth
    assert len(heldout_groups(["a", "b", "c"], 0.9)) == 2   # never all: something is left to train on


def test_split_partitions_the_manifest_by_whole_groups_in_order():
    data = utts({"84-121123": 3, "174-50561": 2, "251-136532": 2})
    fit, held, groups = split_heldout(data, 0.1)
    assert groups == ["251-136532"]
    assert [u.id for u in held] == ["251-136532-0000", "251-136532-0001"]
    assert fit + held == data                               # in order, nothing lost or repeated
    assert not {u.speaker for u in fit} & {u.speaker for u in held}


@pytest.mark.parametrize("data,fraction,says", [
    (utts({"one": 5}), 0.1, "1 group"),
    (utts({"a": 1, "b": 1}), 0.0, "must be in \\(0, 1\\)"),
    (utts({"a": 1, "b": 1}), 1.0, "must be in \\(0, 1\\)"),
    ([Utterance(id="x", audio_filepath="/a.flac", duration=1.0, text="a")], 0.1, "has no speaker"),
])
def test_what_cannot_be_split_is_one_clear_error(data, fraction, says):
    with pytest.raises(HeldoutError, match=says):
        split_heldout(data, fraction)


def test_the_script_writes_both_shares_and_refuses_one_group(tmp_path):
    src = tmp_path / "dev.jsonl"
    data = utts({"AlexSmith_2009": 2, "MariaLopez_2010": 3}, tmp_path)
    for u in data:
        Path(u.audio_filepath).touch()   # the manifest reader checks that the audio exists
    write_manifest(src, data)
    fit, held = tmp_path / "dev_fit.jsonl", tmp_path / "dev_heldout.jsonl"
    cmd = [sys.executable, "scripts/split_heldout.py", "--manifest", str(src), "--fit-out", str(fit),
           "--heldout-out", str(held)]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "held out 1 of 2 groups (3 utterances" in out.stdout
    assert {u.speaker for u in read_manifest(held)} == {"MariaLopez_2010"}
    assert {u.speaker for u in read_manifest(fit)} == {"AlexSmith_2009"}
    write_manifest(src, data[:2])
    bad = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith(f"error: {src}: 1 group(s)")
