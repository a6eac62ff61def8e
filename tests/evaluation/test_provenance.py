"""Checkpoint records of results (asr_pe/evaluation/provenance.py); whether a result is stale is
asr_pe/evaluation/reuse.py's question (tests/evaluation/test_reuse.py)."""

import hashlib

import pytest
import torch

from asr_pe.evaluation.provenance import checkpoint_record
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
