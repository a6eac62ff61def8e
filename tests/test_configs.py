"""Every config file composes; bad group names give Hydra's clear error."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

import asr_pe.training  # noqa: F401  (registers the pe_label resolver)

CONF = Path(__file__).resolve().parents[1] / "conf"
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name != "hydra")


def options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


CASES = [(g, o) for g in GROUPS for o in options(g)]


@pytest.mark.parametrize("group,option", CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_every_config_composes(group, option):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=[f"{group}={option}"], return_hydra_config=False)
    # resolve everything except Hydra's own interpolations
    c = OmegaConf.to_container(cfg, resolve=False)
    assert c["data"]["name"] and c["loss"]["name"] and c["encoder"]["kind"]
    OmegaConf.to_container(cfg.pe, resolve=True)


def test_evaluate_config_composes():
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("evaluate", overrides=["run=/tmp/x"])
    assert cfg.run == "/tmp/x" and cfg.decode.method == "greedy"


@pytest.mark.parametrize("override", ["pe=nope", "data=nope", "loss=nope", "encoder=nope"])
def test_unknown_group_option_is_clear(override):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        with pytest.raises(MissingConfigException, match="nope"):
            compose("train", overrides=[override])


def test_pe_combination_merges_two_files_and_is_labelled():
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["pe=[cape,rope]"])
    assert cfg.pe.input.name == "cape" and cfg.pe.attention.name == "rope"
    assert cfg.name.startswith("cape+rope_ctc")


def test_resume_refuses_a_changed_model_but_not_an_option_added_later_as_null(tmp_path):
    """check_resume_compatible: a run saved before an option existed (e.g. data.concat_max_seconds,
    null = off) resumes under the new config; a changed encoder or data setting does not."""
    from omegaconf import OmegaConf

    from asr_pe.training.run_dir import check_resume_compatible

    with initialize_config_dir(str(CONF), version_base="1.3"):
        now = compose("train", overrides=["pe=rope"])
    saved = OmegaConf.to_container(now, resolve=False)
    del saved["data"]["concat_max_seconds"]
    OmegaConf.save(OmegaConf.create(saved), tmp_path / "config.yaml")
    check_resume_compatible(tmp_path, now)
    with initialize_config_dir(str(CONF), version_base="1.3"):
        changed = compose("train", overrides=["pe=rope", "encoder.n_layers=3"])
    with pytest.raises(ValueError, match="config section 'encoder' differs"):
        check_resume_compatible(tmp_path, changed)
    with initialize_config_dir(str(CONF), version_base="1.3"):
        concat = compose("train", overrides=["pe=rope", "data.concat_max_seconds=20"])
    with pytest.raises(ValueError, match="config section 'data' differs"):
        check_resume_compatible(tmp_path, concat)


def test_run_labels_name_the_training_remedy_and_the_arm():
    from asr_pe.run_folder import run_label, training_remedy

    with initialize_config_dir(str(CONF), version_base="1.3"):
        plain = compose("train", overrides=["pe=rope", "loss=ctc"])
        arm = compose("train", overrides=["pe=none", "loss=ctc", "arm=frontend70"])
        both = compose("train", overrides=["pe=rope", "loss=ctc", "encoder.position_map={kind:scale,range:[1,32]}",
                                           "data.concat_max_seconds=20"])
    assert training_remedy(plain) == "" and run_label(plain) == "rope/ctc"
    assert run_label(arm) == "none/ctc [frontend70]"
    assert training_remedy(both) == "posscale:1-32+concat:20" and run_label(both) == "rope/ctc posscale:1-32+concat:20"


def test_design_doc_lists_every_experiment():
    """docs/design.md's experiment table names each file of conf/experiment/ and nothing else:
    a new experiment is documented where a newcomer looks for it."""
    import re

    repo = Path(__file__).resolve().parents[1]
    on_disk = {p.stem for p in (repo / "conf" / "experiment").glob("*.yaml")}
    doc = (repo / "docs" / "design.md").read_text()
    table = doc.split("| experiment | what it is |", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", table, flags=re.M))
    assert listed == on_disk, f"missing from docs/design.md: {sorted(on_disk - listed)}; " \
                              f"listed but absent: {sorted(listed - on_disk)}"
