"""What the corpus recipes share: recipes/lib/stages.sh (option parsing, stages 3-6) and
asr_pe/data/corpus_cli.py (archive download, the download/extract/prepare command line).

The recipes' commands themselves are checked in test_recipe_run_sh.py; here: both corpora use the
shared helpers (not copies of them), the helpers accept the same common options for both, and a
third corpus written on top of them is a short file that runs the same stages.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asr_pe.data import corpus_cli, librispeech, tedlium
from asr_pe.data.corpus_cli import Archive, fetch_archives
from asr_pe.data.download import ChecksumError, ChecksumListError

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "recipes" / "lib" / "stages.sh"
CORPUS_RECIPES = {"librispeech": REPO / "recipes" / "librispeech" / "run.sh",
                  "tedlium3": REPO / "recipes" / "tedlium3" / "run.sh"}
# the stand-in answers `python -c` (reading a config) for real
ANSWER_C = f'#!/usr/bin/env bash\n[ "$1" = -c ] && exec {sys.executable} "$@"\n'


@pytest.mark.parametrize("name", sorted(CORPUS_RECIPES))
def test_both_recipes_source_the_shared_stages_instead_of_copying_them(name):
    script = CORPUS_RECIPES[name]
    assert subprocess.run(["bash", "-n", str(LIB)]).returncode == 0
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert 'source "$repo/recipes/lib/stages.sh"' in text
    assert re.search(r"^parse_options .* -- \"\$@\"$", text, re.M)
    assert f"recipe_setup {name}\n" in text
    for stage, function in ((3, "stage_longform"), (4, "stage_train"), (5, "stage_evaluate"), (6, "stage_plot")):
        # stage 4 may first split a part both trained and validated on (the shared `heldout_split`)
        assert re.search(rf"^if run_stage {stage}; then(\s|#[^\n]*|heldout_split [^\n]*)*{function}\b", text, re.M), \
            (stage, function)
    # the shared commands and the option loop live in the library only (comments aside)
    code = "\n".join(line.split("  #")[0] for line in text.splitlines() if not line.lstrip().startswith("#"))
    for copied in ("train.py", "evaluate.py", "plot_wer_vs_length.py", "make_longform.py", "while [ $# -gt 0 ]",
                   "recipes/python.sh"):
        assert copied not in code, copied
    # the whole body is still one { ... } block after `set -euo pipefail`
    lines = text.splitlines()
    assert "set -euo pipefail" in lines and lines.index("{") > lines.index("set -euo pipefail")
    assert lines[-2:] == ["exit 0", "}"]


@pytest.mark.parametrize("module,selection", [
    (librispeech, ["--parts", "test-clean"]),
    (tedlium, []),
])
def test_both_data_clis_come_from_the_shared_parser_with_the_same_common_options(module, selection, monkeypatch,
                                                                                 tmp_path):
    built, ran = [], []
    real_parser = corpus_cli.corpus_parser

    def spy_parser(*args, **kwargs):
        built.append(real_parser(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(module, "corpus_parser", spy_parser)
    monkeypatch.setattr(module, "run_corpus_cli", lambda parser, argv, **handlers: ran.append(
        (parser, argv, handlers)) or 0)
    assert module.main(["extract", "--root", str(tmp_path)]) == 0
    (parser, commands), = built
    (ran_parser, argv, handlers), = ran
    assert ran_parser is parser and argv == ["extract", "--root", str(tmp_path)]
    assert set(handlers) == set(commands) == {"download", "extract", "prepare"}
    assert parser.prog == f"python -m {module.__name__}"
    common = ["--root", "r", "--mirror", "http://m/x", "--data-dir", "d", "--no-verify", "--checksums", "c.txt"]
    args = parser.parse_args(["download", *common, *selection])
    assert (args.root, args.mirror) == ("r", "http://m/x")
    assert corpus_cli.download_options(args) == {"data_dir": "d", "verify": False, "checksums": "c.txt"}
    defaults = parser.parse_args(["download", "--root", "r", *selection])
    assert corpus_cli.download_options(defaults) == {"data_dir": None, "verify": True, "checksums": None}
    assert defaults.mirror == "openslr"
    prepared = parser.parse_args(["prepare", "--corpus-dir", "c", "--out-dir", "o", "--overwrite", *selection])
    assert (prepared.corpus_dir, prepared.out_dir, prepared.overwrite) == ("c", "o", True)


@pytest.mark.parametrize("module,argv", [
    (librispeech, ["extract", "--root", "{root}", "--parts", "test-clean"]),
    (tedlium, ["extract", "--root", "{root}"]),
])
def test_both_data_clis_report_an_error_as_one_line_naming_the_file(module, argv, tmp_path, capsys):
    assert module.main([a.format(root=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path}/") and "archive not found" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_fetch_archives_verifies_built_in_or_listed_digests_and_links_data_dir(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    body = b"archive bytes"
    (mirror / "a.tgz").write_bytes(body)
    good = Archive("a.tgz", md5=hashlib.md5(body).hexdigest(), sha256=None)
    assert fetch_archives(mirror.as_uri() + "/", [good], tmp_path / "r1") == [tmp_path / "r1" / "a.tgz"]
    with pytest.raises(ChecksumError, match="a.tgz: md5 checksum mismatch"):
        fetch_archives(mirror.as_uri(), [Archive("a.tgz", md5="0" * 32, sha256=None)], tmp_path / "r2")
    # a checksum list replaces the built-in digests and must name every archive
    listing = tmp_path / "sha256sum.txt"
    listing.write_text(f"{hashlib.sha256(body).hexdigest()}  a.tgz\n")
    bad_builtin = Archive("a.tgz", md5="0" * 32, sha256=None)
    assert fetch_archives(mirror.as_uri(), [bad_builtin], tmp_path / "r3", checksums=listing)[0].read_bytes() == body
    with pytest.raises(ChecksumListError, match=r"sha256sum.txt: no checksum for b.tgz"):
        fetch_archives(mirror.as_uri(), [Archive("b.tgz", None, None)], tmp_path / "r4", checksums=listing)
    # a pre-downloaded copy is used without the mirror (unreachable here)
    got = fetch_archives("http://127.0.0.1:9", [good], tmp_path / "r5", data_dir=mirror)
    assert got[0].read_bytes() == body


def test_the_data_modules_import_neither_lightning_nor_hydra():
    code = ("import sys, asr_pe.data.corpus_cli, asr_pe.data.librispeech, asr_pe.data.tedlium; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning', 'hydra'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


# A third corpus on top of recipes/lib/stages.sh: its own defaults, one option, stages 0-2 and the
# shared stages 3-6. It must stay short: what is not corpus-specific belongs in the library.
TOY_RUN_SH = """#!/usr/bin/env bash
# Toy corpus recipe.
#   stage 2  manifests; stages 3-6 as every corpus
set -euo pipefail
{
stage=0
stop_stage=6
work_dir=exp/toy
data_dir=""
corpus_dir=""
mirror=openslr
verify=true
checksums=""
test_sets_names="eval"
longform_durations="[10,20]"
pes="none rope"
experiment=cape_toy
extra=""
eval_extra=""

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo/recipes/lib/stages.sh"
parse_options test_sets_names -- "$@"
recipe_setup toy
test_sets() { existing_sets "$test_sets_names" "" _long; }

if run_stage 0 && needs_archives 0 && ! downloaded toy; then download_archive toy asr_pe.data.toy; fi
if run_stage 2; then "$PYTHON" -m asr_pe.data.toy prepare --corpus-dir "$corpus_dir" --out-dir "$manifest_dir"; fi
if run_stage 3; then stage_longform $test_sets_names; fi
if run_stage 4; then stage_train; fi
if run_stage 5; then stage_evaluate; fi
if run_stage 6; then stage_plot; fi
log "stages $stage..$stop_stage done"
exit 0
}
"""


def test_a_third_corpus_on_the_shared_stages_is_a_short_file(tmp_path):
    recipes = tmp_path / "repo" / "recipes"
    (recipes / "toy").mkdir(parents=True)
    shutil.copytree(REPO / "recipes" / "lib", recipes / "lib")
    shutil.copy(REPO / "recipes" / "python.sh", recipes / "python.sh")
    script = recipes / "toy" / "run.sh"
    script.write_text(TOY_RUN_SH)
    assert len(TOY_RUN_SH.splitlines()) <= 40
    exe, log = tmp_path / "fake_python", tmp_path / "calls.log"
    exe.write_text(ANSWER_C + """printf '%s\\n' "$*" >> "$FAKE_LOG"
prev=; for a in "$@"; do case "$prev $a" in "--out "*.jsonl) touch "$a" ;; *" run_dir="*) mkdir -p "${a#run_dir=}" ;; esac; prev=$a; done
""")
    exe.chmod(0o755)
    work = tmp_path / "work"
    (work / "manifests").mkdir(parents=True)
    (work / "manifests" / "eval.jsonl").write_text("")
    env = {**os.environ, "PYTHON": str(exe), "FAKE_LOG": str(log)}
    proc = subprocess.run(["bash", str(script), "--work_dir", str(work), "--stage", "3", "--test-sets-names=eval",
                           "--extra", "a=1"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    repo, md, runs = tmp_path / "repo", work / "manifests", work / "runs"
    sets = f"['{md}/eval.jsonl','{md}/eval_long.jsonl']"
    assert log.read_text().splitlines() == [
        f"{repo}/scripts/make_longform.py --manifest {md}/eval.jsonl --out {md}/eval_long.jsonl --durations 10 20",
        *(f"{repo}/train.py experiment=cape_toy pe={pe} run_dir={runs}/{pe} resume=auto "
          f"data.corpus.manifest_dir={md} a=1" for pe in ("none", "rope")),
        *(f"{repo}/evaluate.py run={runs}/{pe} data.test={sets} reuse=true" for pe in ("none", "rope")),
        f"{repo}/scripts/plot_wer_vs_length.py {runs}/none {runs}/rope --test-set eval --metric wer "
        f"--out {work}/plots/eval",
        # the corpus's own utterances (not the joined eval_long): the 5 s natural bins too
        f"{repo}/scripts/plot_natural_bins.py {runs}/none {runs}/rope --test-set eval --out {work}/plots/eval "
        "--paper-caption",
        f"{repo}/scripts/plot_wer_vs_length.py {runs}/none {runs}/rope --test-set eval_long --metric wer "
        f"--reference-set eval --out {work}/plots/eval_long",
        f"{repo}/scripts/plot_corpus_figure.py {runs}/none {runs}/rope --test-sets eval eval_long "
        f"--metric wer --out {work}/plots/wer_vs_length_all.png",
        f"{repo}/scripts/in_context_table.py {runs}/none {runs}/rope --pair eval_long eval --metric wer "
        f"--out {work}/plots/in_context_wer.md",
    ]
    assert "[toy] stages 3..6 done" in proc.stdout
    helped = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, env=env)
    assert helped.stdout == "Toy corpus recipe.\n  stage 2  manifests; stages 3-6 as every corpus\n"
    bad = subprocess.run(["bash", str(script), "--subset", "x"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "unknown option --subset" in bad.stderr  # another corpus's option
