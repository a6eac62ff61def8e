"""The package's layering: the library layers never import the Lightning/Hydra wiring.

``asr_pe.training`` (Lightning module, data module, ``train``, the corpus located with Hydra's
``instantiate``) may import from ``inference``, ``models``, ``data``, ``decoding``,
``evaluation`` and ``plots``, never the reverse: loading a trained run and decoding it live in
``asr_pe.inference`` (``run_loading``, ``decode``), evaluating it in ``asr_pe.evaluation``
(``pipeline.evaluate_run``, ``ladder``), and ``model_kwargs`` beside the model it builds
(``asr_pe.models.asr``). None of those layers imports Lightning or Hydra. The run folder's
layout (``asr_pe.run_folder``) sits below all of them: it imports nothing of the package but
``asr_pe.io`` and nothing heavier than OmegaConf, so the recipes' small ``python -m`` calls and
the plots read a run folder without torch. Every import counts, including the ones inside
functions, which hid the old circle ``training.evaluate`` ↔ ``inference.transcribe``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "asr_pe"
LIBRARY_LAYERS = ("inference", "models", "data", "decoding", "evaluation", "plots")
NO_FRAMEWORK = LIBRARY_LAYERS
FRAMEWORKS = ("lightning", "pytorch_lightning", "hydra")
RUN_FOLDER = PACKAGE / "run_folder.py"
# what the run folder's module may import: the standard library, OmegaConf, and of the package
# only the atomic writes and the error classes (which import nothing)
RUN_FOLDER_MAY_IMPORT = ("asr_pe.io", "asr_pe.errors", "omegaconf", "__future__")


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path`` (a file under ``root``), at any
    depth; relative imports are resolved against the file's package, and ``from m import x``
    yields both ``m`` and ``m.x`` (``x`` may be a submodule)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return out


def _is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _files(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", LIBRARY_LAYERS)
def test_library_layers_do_not_import_training(layer):
    files = _files(layer)
    assert files, f"asr_pe/{layer} has no modules"
    bad = [f"{p.relative_to(PACKAGE.parent)}:{line}: {module}"
           for p in files for line, module in imported_modules(p) if _is_under(module, "asr_pe.training")]
    assert not bad, "asr_pe.training may import these layers, never the reverse:\n" + "\n".join(bad)


@pytest.mark.parametrize("layer", NO_FRAMEWORK)
def test_library_layers_do_not_import_lightning_or_hydra(layer):
    bad = [f"{p.relative_to(PACKAGE.parent)}:{line}: {module}"
           for p in _files(layer) for line, module in imported_modules(p)
           if any(_is_under(module, f) for f in FRAMEWORKS)]
    assert not bad, (f"asr_pe/{layer} stays free of Lightning and Hydra (Hydra's instantiate belongs to "
                     "asr_pe/training or the entry scripts):\n" + "\n".join(bad))


def test_the_run_folder_module_sits_below_everything():
    stdlib = sys.stdlib_module_names
    bad = [f"{RUN_FOLDER.relative_to(PACKAGE.parent)}:{line}: {module}"
           for line, module in imported_modules(RUN_FOLDER)
           if module.split(".")[0] not in stdlib
           and not any(_is_under(module, allowed) for allowed in RUN_FOLDER_MAY_IMPORT)]
    assert not bad, "asr_pe/run_folder.py imports only the standard library, OmegaConf and asr_pe.io:\n" + "\n".join(bad)


def test_the_run_folder_module_loads_without_torch():
    """What the recipes and plots rely on: reading a run folder does not pull in torch."""
    code = ("import sys, asr_pe.run_folder; "
            "sys.exit(1 if any(m == 'torch' or m.startswith('torch.') for m in sys.modules) else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    assert proc.returncode == 0, proc.stderr or "importing asr_pe.run_folder loaded torch"


def test_the_checker_sees_imports_inside_functions_and_relative_ones(tmp_path):
    """The old circle: ``transcribe_file`` imported ``load_run`` from training inside its body."""
    pkg = tmp_path / "asr_pe" / "inference"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    mod = pkg / "transcribe.py"
    mod.write_text("def f():\n    from asr_pe.training.evaluate import decode_batch, load_run\n"
                   "from ..training import train\nfrom .. import training\n")
    found = [m for _, m in imported_modules(mod, tmp_path) if _is_under(m, "asr_pe.training")]
    assert "asr_pe.training.evaluate" in found
    assert "asr_pe.training.train" in found and "asr_pe.training" in found
