"""Fixtures of the end-to-end tests: a tiny generated corpus, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e_helpers import TINY_SYNTH


@pytest.fixture(scope="session")
def tiny_synth_root(tmp_path_factory) -> Path:
    """Cache root holding a tiny synth corpus (built once per test session)."""
    from asr_pe.data.synth import prepare_synth

    root = tmp_path_factory.mktemp("synth_cache")
    prepare_synth(root=root, progress=False, **TINY_SYNTH)
    return root
