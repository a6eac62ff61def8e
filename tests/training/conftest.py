"""Fixtures of the training tests: the tiny generated corpus of the end-to-end tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # the end-to-end helpers live in tests/integration
    sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """Cache root holding the tiny synth corpus of `integration.e2e_helpers.TINY_SYNTH`."""
    from asr_pe.data.synth import prepare_synth
    from integration.e2e_helpers import TINY_SYNTH

    root = tmp_path_factory.mktemp("synth_cache")
    prepare_synth(root=root, progress=False, **TINY_SYNTH)
    return root
