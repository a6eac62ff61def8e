"""Named text normalisers for scoring another system's output (off by default).

The toolkit's own scoring only lowercases and collapses white space (`asr_pe.evaluation.scoring`):
the corpora's references are normalised at preparation. A foreign system (Whisper, a cased and
punctuated NeMo model) writes "Mr. Smith's $20." where the reference says "mister smith's twenty
dollars"; reviewers score such systems after Whisper's English normaliser, applied to the reference
and the hypothesis alike (Radford et al. 2022, appendix C). `score.py --normalizer NAME` does that
with the maintained PyPI package ``whisper-normalizer`` (`pip install -e '.[normalize]'`, pinned in
pyproject.toml); its name, the package and its version go into ``buckets.meta.json`` so a number
always says how it was normalised.

- ``whisper_english``: ``whisper_normalizer.english.EnglishTextNormalizer`` (spellings, numbers,
  contractions, fillers removed);
- ``whisper_basic``: ``whisper_normalizer.basic.BasicTextNormalizer`` (lower case, punctuation and
  bracketed tags removed; any language).
"""

from __future__ import annotations

import importlib.metadata
from typing import Callable

from asr_pe.errors import ConfigError

__all__ = ["NORMALIZERS", "NormalizerError", "load_normalizer"]

# name -> (module, class) of the whisper-normalizer package
NORMALIZERS = {"whisper_english": ("whisper_normalizer.english", "EnglishTextNormalizer"),
               "whisper_basic": ("whisper_normalizer.basic", "BasicTextNormalizer")}
PACKAGE = "whisper-normalizer"


class NormalizerError(ConfigError):
    """An unknown normaliser name, or its package is not installed."""


def load_normalizer(name: str) -> tuple[Callable[[str], str], dict]:
    """(the function, its record for buckets.meta.json: name, package, version)."""
    if name not in NORMALIZERS:
        raise NormalizerError(f"--normalizer {name!r}: choose one of {', '.join(NORMALIZERS)}")
    module_name, cls_name = NORMALIZERS[name]
    try:
        import importlib

        module = importlib.import_module(module_name)
        version = importlib.metadata.version(PACKAGE)
    except (ImportError, importlib.metadata.PackageNotFoundError):
        raise NormalizerError(f"--normalizer {name} needs the package {PACKAGE}: pip install -e '.[normalize]' "
                              f"(or pip install {PACKAGE})") from None
    return getattr(module, cls_name)(), {"name": name, "package": PACKAGE, "version": version}
