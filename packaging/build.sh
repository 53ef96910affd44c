#!/usr/bin/env bash
# Build the one-folder desktop bundle dist/lbi/ (programs dist/lbi/lbi-gui and dist/lbi/lbi)
# from this checkout with PyInstaller, in a venv of its own.
#
# The venv lives outside the checkout (it holds a ~6 GB CUDA torch build), keyed on
# sha256(pyproject.toml) + Python version with a `.complete` marker, like .ci/run, and is
# reused by later builds from any checkout. Environment:
#   LBI_PYTHON=python3.11      interpreter for the venv (default python3)
#   LBI_PKG_VENV=/path         use this venv instead (created if missing)
#   LBI_TORCH_INDEX=URL        install torch and torchvision from this index first, e.g.
#                              the CPU-only https://download.pytorch.org/whl/cpu
#   LBI_TORCH_REQ=REQ          install this torch first, e.g. "torch==2.13.0+cpu"
#   (with either, the rest of the install is constrained to that torch; see README.md)
#   LBI_BUNDLE_NO_TORCHVISION=1  leave torchvision out of the bundle
#   LBI_BUNDLE_KEEP_TRITON=1   keep triton in the bundle (+~0.9 GB; torch.compile only)
# Then run packaging/smoke_test.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
START=$SECONDS
step() { printf '\n==> [%4ds] %s\n' "$((SECONDS - START))" "$*"; }

[ -f lbi_gui/app.py ] || { echo "ERROR: lbi_gui/app.py is missing (entry of lbi-gui)" >&2; exit 1; }
[ -f lbi_engine/cli.py ] || [ -f lbi_engine/cli/__init__.py ] \
  || { echo "ERROR: lbi_engine/cli is missing (entry of lbi)" >&2; exit 1; }

PYTHON=${LBI_PYTHON:-python3}
pyver=$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
key="$(cat pyproject.toml <(echo "${LBI_TORCH_INDEX:-}|${LBI_TORCH_REQ:-}") | sha256sum | cut -c1-16)-$pyver"
root=${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/lbi-pkg-venvs
VENV=${LBI_PKG_VENV:-$root/$key}

if [ -f "$VENV/.complete" ]; then
  step "venv: reusing $VENV"
else
  step "venv: building $VENV (a few minutes)"
  if [ -z "${LBI_PKG_VENV:-}" ]; then
    mkdir -p "$root"
    find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -print -exec rm -rf {} +
  fi
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  log=$VENV/pip.log
  {
    "$VENV/bin/python" -m pip install --upgrade pip
    constraint=()
    if [ -n "${LBI_TORCH_INDEX:-}${LBI_TORCH_REQ:-}" ]; then
      # A chosen torch build first (e.g. CPU-only), then the project with torch pinned to
      # exactly that build so the resolver cannot swap it for the default CUDA one.
      if [ -n "${LBI_TORCH_INDEX:-}" ]; then
        "$VENV/bin/python" -m pip install --index-url "$LBI_TORCH_INDEX" \
          "${LBI_TORCH_REQ:-torch}" torchvision
      else
        "$VENV/bin/python" -m pip install "$LBI_TORCH_REQ"
      fi
      tv=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))')
      echo "torch==$tv" > "$VENV/torch-constraint.txt"
      constraint=(-c "$VENV/torch-constraint.txt")
    fi
    "$VENV/bin/python" -m pip install "${constraint[@]}" -e ".[packaging]"
  } >"$log" 2>&1 || { cat "$log"; echo "ERROR: venv install failed (log above)" >&2; exit 1; }
  touch "$VENV/.complete"
fi
# The venv may be shared between checkouts: point the editable install at this one.
log=$(mktemp)
"$VENV/bin/python" -m pip install --no-deps -e . >"$log" 2>&1 \
  || { cat "$log"; echo "ERROR: could not install the project into $VENV" >&2; exit 1; }
rm -f "$log"

step "pyinstaller: packaging/lbi.spec -> dist/lbi"
t0=$SECONDS
rm -rf dist/lbi build/pyinstaller
# PyInstaller imports every torch submodule to list them; silence their deprecation notices.
PYTHONWARNINGS=ignore::DeprecationWarning \
  "$VENV/bin/python" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/lbi.spec
build_s=$((SECONDS - t0))

step "done: dist/lbi"
echo "    pyinstaller time: ${build_s} s"
echo "    bundle size:      $(du -sh dist/lbi | cut -f1) ($(find dist/lbi -type f | wc -l) files)"
echo "    largest parts:"
du -s dist/lbi/_internal/* dist/lbi/_internal/*/* 2>/dev/null | sort -rn | head -12 \
  | awk '{ printf "      %7.0f MB  %s\n", $1/1024, $2 }'
echo "Next: packaging/smoke_test.sh"
