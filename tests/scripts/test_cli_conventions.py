"""Every command-line entry point speaks one dialect (CONTRIBUTING.md, "Command-line conventions"):

- a script that takes a run folder is a Hydra app (``run=<dir> key=value``) started through
  ``run_hydra_main``; every other one parses ``--kebab-case`` flags with argparse;
- ``--help`` exits 0; a bad command line or bad input prints an ``error: ...`` line and exits 2;
- no script edits ``sys.path``: the package is installed (editable), scripts run as
  ``python scripts/<name>.py`` from the repository root.

The static checks read every entry point; the command-line checks run the argparse entry points
in one child process (their heavy imports once), and one Hydra script in two children.
The sweep over every Hydra entry point is marked slow (a Hydra start is seconds each).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOP_LEVEL = ["train.py", "evaluate.py", "transcribe.py", "score.py"]
SCRIPTS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "scripts").glob("*.py"))
# `python -m asr_pe....` command lines (the recipes' data stages, the benchmark's child); the
# espeak server (`--serve`, spoken to over a pipe) is internal plumbing.
MODULES = ["asr_pe.data.librispeech", "asr_pe.data.tedlium", "asr_pe.data.kaldi_export", "asr_pe.data.synth",
           "asr_pe.data.synth.ladder", "asr_pe.bench.long_worker",
           "asr_pe.bench.grad_check", "asr_pe.bench.recipe_smoke", "asr_pe.results_table",
           "asr_pe.evaluation.alignment_report", "asr_pe.data.lhotse_manifests", "asr_pe.inference.remedy_specs"]
HYDRA_ENTRIES = ["train.py", "evaluate.py", "transcribe.py", "scripts/attention_vs_length.py",
                 "scripts/plot_attention.py", "scripts/evaluate_ladder.py", "scripts/evaluate_rates.py"]


def module_file(module: str) -> Path:
    path = REPO / Path(*module.split("."))
    return path / "__main__.py" if path.is_dir() else path.with_suffix(".py")


def source(entry: str) -> str:
    return (REPO / entry).read_text() if entry.endswith(".py") else module_file(entry).read_text()


def test_the_lists_cover_every_entry_point():
    """A new script or `python -m` module is checked here too: the lists are complete."""
    assert SCRIPTS and all((REPO / s).is_file() for s in [*TOP_LEVEL, *SCRIPTS])
    mains = {p.relative_to(REPO).with_suffix("").as_posix().replace("/", ".").removesuffix(".__main__")
             for p in (REPO / "asr_pe").rglob("*.py") if 'if __name__ == "__main__"' in p.read_text()}
    assert mains == {*MODULES, "asr_pe.data.synth.espeak"}
    hydra = {e for e in [*TOP_LEVEL, *SCRIPTS] if "@hydra.main" in source(e)}
    assert hydra == set(HYDRA_ENTRIES)


@pytest.mark.parametrize("entry", [*TOP_LEVEL, *SCRIPTS, *MODULES])
def test_static_conventions(entry):
    text = source(entry)
    tree = ast.parse(text)
    assert not re.search(r"sys\.path\.(insert|append)", text), f"{entry} edits sys.path"
    # exit status: 0 or 2 (bad input), never 1 for an error the script reports itself
    assert not re.search(r"\breturn 1\b|sys\.exit\(1\)|SystemExit\(['\"f]", text), f"{entry}: exit 1 or SystemExit(str)"
    # own error messages start with "error: " (no "<script>: ..." prefixes)
    for call in ast.walk(tree):
        if (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print"
                and any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in call.keywords)
                and call.args and isinstance(call.args[0], (ast.Constant, ast.JoinedStr))):
            first = call.args[0]
            head = first.value if isinstance(first, ast.Constant) else getattr(first.values[0], "value", "")
            assert not re.match(r"[\w.]+: ", str(head)) or str(head).startswith("error: "), \
                f"{entry}:{call.lineno}: stderr message {head!r} does not start with 'error: '"
    flags = re.findall(r"add_argument\(\s*f?[\"'](--[^\"']+)[\"']", text)
    assert all("_" not in f for f in flags), f"{entry}: flags are --kebab-case: {flags}"
    if entry in HYDRA_ENTRIES:
        assert "run_hydra_main(main)" in text, f"{entry}: start the Hydra app through run_hydra_main"
        assert "ArgumentParser" not in text
    elif entry != "asr_pe.data.tedlium" and entry != "asr_pe.data.librispeech":  # their parser: corpus_cli
        assert "ArgumentParser" in text, f"{entry}: not a run script, so argparse"


# Runs inside one child: each argparse entry point's main() with --help, then with an unknown flag.
DRIVER = r"""
import contextlib, importlib, importlib.util, io, json, sys
results = {}
for entry in sys.argv[1:]:
    if entry.endswith(".py"):
        spec = importlib.util.spec_from_file_location("entry_" + entry.replace("/", "_")[:-3], entry)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(entry if not entry.endswith("synth") else entry + ".__main__")
    for argv in (["--help"], ["--no-such-flag"]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = mod.main(argv)
            except SystemExit as e:
                code = e.code
        results[f"{entry} {argv[0]}"] = [code, out.getvalue()[:400], err.getvalue()[-400:]]
print(json.dumps(results))
"""

ARGPARSE_ENTRIES = [e for e in [*TOP_LEVEL, *SCRIPTS] if e not in HYDRA_ENTRIES] + MODULES


def test_argparse_entry_points_help_exits_0_and_an_unknown_flag_exits_2_with_an_error_line():
    proc = subprocess.run([sys.executable, "-c", DRIVER, *ARGPARSE_ENTRIES], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    assert len(results) == 2 * len(ARGPARSE_ENTRIES)
    for entry in ARGPARSE_ENTRIES:
        code, out, _ = results[f"{entry} --help"]
        assert code == 0 and "usage:" in out, (entry, code, out)
        code, _, err = results[f"{entry} --no-such-flag"]
        last = err.strip().splitlines()[-1]
        assert code == 2 and re.match(r"^(.+: )?error: ", last), (entry, code, err)  # argparse: "<prog>: error: "


def run_entry(entry: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, entry, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_hydra_script_reports_command_line_errors_as_one_line_and_exit_2():
    bad_key = run_entry("scripts/evaluate_ladder.py", "no_such_key=1")
    assert bad_key.returncode == 2, bad_key.stderr[-2000:]
    assert bad_key.stderr.strip().splitlines() == [
        "error: Could not override 'no_such_key'. To append to your config use +no_such_key=1"]
    missing = run_entry("scripts/evaluate_ladder.py")  # run=??? nobody gave
    assert missing.returncode == 2 and missing.stderr.strip() == "error: run=… is required (see --help)"


@pytest.mark.slow  # six Hydra apps, four starts each: minutes on 2 busy cores
@pytest.mark.parametrize("entry", HYDRA_ENTRIES)
def test_every_hydra_entry_point(entry):
    helped = run_entry(entry, "--help")
    assert helped.returncode == 0 and "Powered by Hydra" in helped.stdout
    for args, says in ((["no_such_key=1"], "error: Could not override 'no_such_key'"),
                       (["run=[a"], "error: no viable alternative at input '[a'"),
                       ([], "error: run=… is required" if entry != "train.py" else None)):
        if says is None:  # train.py needs no key: its defaults train the demo
            continue
        r = run_entry(entry, *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(says), (entry, args, r.stderr[-2000:])
