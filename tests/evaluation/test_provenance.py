"""Checkpoint records of results (asr_pe/evaluation/provenance.py); whether a result is stale is
asr_pe/evaluation/reuse.py's question (tests/evaluation/test_reuse.py)."""

import hashlib

import pytest
import torch

from asr_pe.evaluation.provenance import checkpoint_record, file_sha256, weights_sha256
from asr_pe.inference.run_loading import CheckpointError



def test_record_names_the_file_its_step_and_its_bytes(tmp_path):
    ckpt = tmp_path / "best.ckpt"
    torch.save({"global_step": 1234, "state_dict": {"w": torch.ones(3)}}, ckpt)
    assert checkpoint_record(ckpt) == {"name": "best.ckpt", "global_step": 1234,
                                       "sha256": hashlib.sha256(ckpt.read_bytes()).hexdigest()}
    torch.save({"w": torch.ones(3)}, ckpt)  # a bare state dict has no step
    assert checkpoint_record(ckpt)["global_step"] is None


@pytest.mark.parametrize("content", [b"not a checkpoint at all", b""])
def test_a_file_that_does_not_load_is_one_checkpoint_error_naming_it(tmp_path, content):
    # the record is taken before the model loads: torch's own error (a non-zip file cannot be
    # mmapped) would be a traceback instead of the entry points' one line
    ckpt = tmp_path / "best.ckpt"
    ckpt.write_bytes(content)
    with pytest.raises(CheckpointError, match=rf"^{ckpt}: not a readable checkpoint .*; try this$"):
        checkpoint_record(ckpt, hint="try this")
    torch.save([1, 2], ckpt)  # loads, but is no checkpoint
    with pytest.raises(CheckpointError, match="not a checkpoint \\(holds a list"):
        checkpoint_record(ckpt)


def test_the_weights_digest_is_the_weights_alone_not_the_folder_the_file_names(tmp_path):
    """Two checkpoints of the same weights whose callbacks name other run folders (a source trained
    again in another work folder) are other files with one weights digest; one weight a ulp away, a
    renamed or reshaped entry, or another dtype is another digest; a bare state dict is its weights."""
    weights = {"enc.w": torch.randn(4, 3), "enc.b": torch.zeros(3), "step": torch.tensor(7),
               "half": torch.randn(2, dtype=torch.bfloat16), "empty": torch.zeros(0)}

    def save(name, state, folder):
        path = tmp_path / name
        torch.save({"global_step": 7, "state_dict": state,
                    "callbacks": {"BestCheckpoint": {"dirpath": f"{folder}/checkpoints"}}}, path)
        return path

    a, b = save("a.ckpt", weights, "/work/lane4_work/runs/x"), save("b.ckpt", dict(weights), "/work/lane5_work/runs/x")
    assert file_sha256(a) != file_sha256(b)
    assert weights_sha256(a) == weights_sha256(b)
    torch.save(weights, tmp_path / "bare.ckpt")
    assert weights_sha256(tmp_path / "bare.ckpt") == weights_sha256(a)
    nudged = dict(weights, **{"enc.w": weights["enc.w"].clone()})
    nudged["enc.w"][1, 2] = torch.nextafter(nudged["enc.w"][1, 2], torch.tensor(float("inf")))
    renamed = {("enc.v" if k == "enc.w" else k): v for k, v in weights.items()}
    reshaped = dict(weights, **{"enc.w": weights["enc.w"].reshape(3, 4)})
    cast = dict(weights, **{"enc.b": weights["enc.b"].double()})
    others = [weights_sha256(save(f"{i}.ckpt", w, "/x")) for i, w in enumerate((nudged, renamed, reshaped, cast))]
    assert len({weights_sha256(a), *others}) == 5
