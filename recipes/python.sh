# Sourced by the recipes' run.sh after $repo is set: picks the Python that runs the toolkit and
# checks that it has the toolkit's packages, so a wrong interpreter fails here with one line
# instead of a ModuleNotFoundError traceback from deep inside a stage; then puts $repo first on
# PYTHONPATH.
#   $PYTHON if set; else the repository's venv (made by `make install`) if it exists; else python.
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python; fi
fi
if ! command -v "$PYTHON" > /dev/null 2>&1; then
  echo "$0: no Python interpreter '$PYTHON' (run \`make install\`, or set PYTHON=/path/to/python)" >&2
  exit 2
fi
# find_spec only locates the packages (no import of torch): a fraction of a second.
python_missing=$("$PYTHON" -c "import importlib.util as u; \
print(' '.join(m for m in ('torch', 'torchaudio', 'hydra', 'omegaconf', 'lightning') if u.find_spec(m) is None))")
if [ -n "$python_missing" ]; then
  echo "$0: $PYTHON lacks $python_missing (run \`make install\` and use .venv/bin/python," \
       "or set PYTHON=/path/to/python)" >&2
  exit 2
fi
unset python_missing
export PYTHON
# The stages run this checkout's scripts, so they import this checkout's package, whatever else
# the interpreter has installed (`make install` installs this checkout editable: the same code).
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
