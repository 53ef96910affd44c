#!/usr/bin/env bash
# Install the lbi desktop entry and icons for the current user (XDG, no root):
#   $XDG_DATA_HOME/applications/lbi.desktop
#   $XDG_DATA_HOME/icons/hicolor/{16..256}x{..}/apps/lbi.png and scalable/apps/lbi.svg
#   $XDG_DATA_HOME/mime/packages/lbi-onnx.xml  (so .onnx files offer "Open with lbi")
# XDG_DATA_HOME defaults to ~/.local/share.
#
# Usage: packaging/install-desktop-entry.sh [--exec PATH] [--uninstall]
#   --exec PATH   command to put in Exec= (default: lbi-gui from PATH; for a PyInstaller
#                 bundle give dist/lbi/lbi-gui). Must be an absolute path or on PATH.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ICONS=$HERE/../resources/icons
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
EXEC=lbi-gui
UNINSTALL=0

while [ $# -gt 0 ]; do
  case "$1" in
    --exec) EXEC=${2:?--exec needs a path}; shift 2 ;;
    --uninstall) UNINSTALL=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option '$1'; see --help" >&2; exit 2 ;;
  esac
done

refresh() {
  # All optional: present on full desktops, absent on servers; the files work without them.
  command -v update-desktop-database >/dev/null && update-desktop-database -q "$DATA/applications" || true
  command -v update-mime-database >/dev/null && update-mime-database "$DATA/mime" >/dev/null || true
  # Only refresh an icon cache that already exists: creating one in a user folder would hide
  # icons that other programs install there later without updating it.
  if [ -f "$DATA/icons/hicolor/icon-theme.cache" ] && command -v gtk-update-icon-cache >/dev/null; then
    gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
  fi
}

sizes="16 32 48 64 128 256"
if [ "$UNINSTALL" -eq 1 ]; then
  rm -f "$DATA/applications/lbi.desktop" "$DATA/mime/packages/lbi-onnx.xml" \
        "$DATA/icons/hicolor/scalable/apps/lbi.svg"
  for s in $sizes; do rm -f "$DATA/icons/hicolor/${s}x${s}/apps/lbi.png"; done
  refresh; echo "lbi desktop entry removed from $DATA"; exit 0
fi

if [[ "$EXEC" == */* ]]; then
  [ -x "$EXEC" ] || { echo "--exec $EXEC is not an executable file" >&2; exit 1; }
  EXEC=$(cd "$(dirname "$EXEC")" && pwd)/$(basename "$EXEC")
elif ! command -v "$EXEC" >/dev/null; then
  echo "warning: '$EXEC' is not on PATH; the menu entry will not start until it is" \
       "(pip install lbi, or pass --exec /path/to/lbi-gui)" >&2
fi

install -d "$DATA/applications" "$DATA/mime/packages" "$DATA/icons/hicolor/scalable/apps"
for s in $sizes; do
  src=$ICONS/lbi-$s.png; [ "$s" = 256 ] && src=$ICONS/lbi.png
  install -D -m 644 "$src" "$DATA/icons/hicolor/${s}x${s}/apps/lbi.png"
done
install -m 644 "$ICONS/lbi.svg" "$DATA/icons/hicolor/scalable/apps/lbi.svg"
# Exec/TryExec point at the chosen launcher; a path with spaces is quoted per the spec.
q=$EXEC; [[ "$q" == *" "* ]] && q="\"$q\""
sed -e "s|^Exec=lbi-gui|Exec=$q|" -e "s|^TryExec=lbi-gui|TryExec=$q|" \
  "$HERE/lbi.desktop" > "$DATA/applications/lbi.desktop"
chmod 644 "$DATA/applications/lbi.desktop"
cat > "$DATA/mime/packages/lbi-onnx.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<mime-info xmlns="http://www.freedesktop.org/standards/shared-mime-info">
  <mime-type type="application/onnx">
    <comment>ONNX neural network model</comment>
    <glob pattern="*.onnx"/>
  </mime-type>
</mime-info>
XML
refresh
echo "lbi desktop entry installed in $DATA (Exec=$q)"
