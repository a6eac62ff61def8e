"""The private Lightning names the resume guarantees rely on exist in the installed Lightning, and
another Lightning minor version is refused with one line (asr_pe/training/lightning_private.py)."""

import re
from pathlib import Path

import pytest

from asr_pe.training.lightning_private import (
    TESTED, UntestedLightningError, check_lightning, lightning_version, missing_private_names, precision_flag_error)

ROOT = Path(__file__).resolve().parents[2]


def test_every_private_name_exists_in_the_installed_lightning():
    assert missing_private_names() == []


def test_pyproject_pins_the_tested_versions_and_they_include_the_installed_one():
    pin = re.search(r'"lightning>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin and pin.group(1) == TESTED[0], "pyproject.toml and TESTED disagree"
    assert ".".join(lightning_version().split(".")[:2]) in TESTED
    check_lightning()


def test_an_untested_version_is_one_error_unless_allowed(monkeypatch):
    monkeypatch.delenv("ASR_PE_UNTESTED_LIGHTNING", raising=False)
    with pytest.raises(UntestedLightningError, match=r"lightning 2\.9\.0 is not a version .*ASR_PE_UNTESTED_LIGHTNING=1"):
        check_lightning("2.9.0")
    monkeypatch.setenv("ASR_PE_UNTESTED_LIGHTNING", "1")
    check_lightning("2.9.0")


def test_precision_flags_come_from_lightning():
    assert precision_flag_error("bf16-mixed") is None
    assert "bf16-mixed" in precision_flag_error("bogus")
