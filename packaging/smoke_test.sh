#!/usr/bin/env bash
# Start the built bundle without a screen and check it works end to end:
#   1. dist/lbi/lbi-gui --smoke-test   (offscreen Qt; the app runs one short inversion on its
#      bundled default problem and exits 0)
#   2. the same under Xvfb with the real xcb platform plugin, when xvfb-run is installed
#   3. dist/lbi/lbi --version and `lbi list` (the command line starts and finds the bundled
#      zoo networks and data sets)
# Usage: packaging/smoke_test.sh [BUNDLE_DIR]   (default dist/lbi)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUNDLE=${1:-dist/lbi}
GUI=$BUNDLE/lbi-gui
CLI=$BUNDLE/lbi
[ -x "$GUI" ] || { echo "ERROR: $GUI not found; build it with packaging/build.sh" >&2; exit 1; }
TIMEOUT=${LBI_SMOKE_TIMEOUT:-300}
# Run from an empty folder with a clean environment so the bundle cannot lean on this
# checkout's sources or a venv on PATH.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
GUI=$(abs "$GUI"); CLI=$(abs "$CLI")
clean_env=(env -i HOME="$work" PATH=/usr/bin:/bin LANG=C.UTF-8 XDG_RUNTIME_DIR="$work")

run() {  # name, command...
  local name=$1; shift
  local t0=$SECONDS rc=0
  (cd "$work" && timeout "$TIMEOUT" "$@") >"$work/$name.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -40 "$work/$name.log"
    echo "FAIL: $name (exit $rc after $((SECONDS - t0)) s)" >&2
    exit 1
  fi
  echo "ok:   $name ($((SECONDS - t0)) s)"
  tail -3 "$work/$name.log" | sed 's/^/      /'
}

if ! timeout 120 "${clean_env[@]}" QT_QPA_PLATFORM=offscreen "$GUI" --help 2>&1 \
    | grep -q -- --smoke-test; then
  echo "FAIL: $GUI --help lists no --smoke-test option; lbi_gui/app.py must provide it" \
       "(run one short inversion on the bundled default problem, exit 0)" >&2
  exit 1
fi
run "gui offscreen --smoke-test" "${clean_env[@]}" QT_QPA_PLATFORM=offscreen "$GUI" --smoke-test
if command -v xvfb-run >/dev/null; then
  # xvfb-run exports DISPLAY and XAUTHORITY to its child: pass those two through env -i.
  run "gui xcb under Xvfb --smoke-test" xvfb-run -a -s "-screen 0 1280x800x24" \
    bash -c 'exec env -i HOME="$1" PATH=/usr/bin:/bin LANG=C.UTF-8 XDG_RUNTIME_DIR="$1" \
      DISPLAY="$DISPLAY" XAUTHORITY="$XAUTHORITY" QT_QPA_PLATFORM=xcb "$2" --smoke-test' \
    _ "$work" "$GUI"
else
  echo "skip: xvfb-run not installed (apt-get install xvfb xauth libxcb-icccm4 libxcb-keysyms1)"
fi
run "cli --version" "${clean_env[@]}" "$CLI" --version
run "cli list" "${clean_env[@]}" "$CLI" list
echo "smoke test passed: $BUNDLE"
