"""The package's layering: the library layers never import the Lightning/Hydra wiring.

``asr_pe.training`` (Lightning module, data module, ``train``, ``evaluate_run``) may import
from ``inference``, ``models``, ``data``, ``decoding`` and ``evaluation``, never the reverse:
loading a trained run and decoding it live in ``asr_pe.inference`` (``run_loading``,
``decode``), and ``model_kwargs`` beside the model it builds (``asr_pe.models.asr``). Models
and data import neither Lightning nor Hydra. Every import counts, including the ones inside
functions, which hid the old circle ``training.evaluate`` ↔ ``inference.transcribe``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "asr_pe"
LIBRARY_LAYERS = ("inference", "models", "data", "decoding", "evaluation")
NO_FRAMEWORK = ("models", "data")
FRAMEWORKS = ("lightning", "pytorch_lightning", "hydra")


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
def test_models_and_data_do_not_import_lightning_or_hydra(layer):
    bad = [f"{p.relative_to(PACKAGE.parent)}:{line}: {module}"
           for p in _files(layer) for line, module in imported_modules(p)
           if any(_is_under(module, f) for f in FRAMEWORKS)]
    assert not bad, "models and data stay free of Lightning and Hydra:\n" + "\n".join(bad)


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
