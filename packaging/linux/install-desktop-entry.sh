#!/usr/bin/env bash
# Installs Foresay's menu entry and icon for the current user (no root needed), following the
# freedesktop specs: ~/.local/share/applications/foresay.desktop and the hicolor icon theme.
#
#   install-desktop-entry.sh [EXECUTABLE]     # install (default: the foresay next to this script,
#                                             # else `foresay` on PATH)
#   install-desktop-entry.sh --uninstall      # remove what install put there
#
# It works from the unpacked tarball (foresay/install-desktop-entry.sh, icons in foresay/icons)
# and from a checkout (packaging/linux/, icons in assets/icons). XDG_DATA_HOME is honoured.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
apps=$data/applications
icons=$data/icons/hicolor
sizes=(16 24 32 48 64 128 256 512)

refresh_caches() {  # menus pick the change up without a new login; optional tools
  command -v update-desktop-database >/dev/null && update-desktop-database -q "$apps" || true
  command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$icons" 2>/dev/null || true
}

if [ "${1:-}" = "--uninstall" ]; then
  rm -f "$apps/foresay.desktop" "$icons/scalable/apps/foresay.svg"
  for s in "${sizes[@]}"; do rm -f "$icons/${s}x${s}/apps/foresay.png"; done
  refresh_caches
  echo "removed the Foresay menu entry and icons from $data"
  exit 0
fi

exe=${1:-}
if [ -z "$exe" ]; then
  if [ -x "$here/foresay" ]; then exe=$here/foresay
  elif command -v foresay >/dev/null; then exe=$(command -v foresay)
  else echo "install-desktop-entry: no foresay executable next to this script or on PATH; pass its path" >&2; exit 2
  fi
fi
[ -x "$exe" ] || { echo "install-desktop-entry: $exe is not an executable" >&2; exit 2; }
exe=$(cd "$(dirname "$exe")" && pwd)/$(basename "$exe")

icon_dir=""
for d in "$here/icons" "$here/../../assets/icons"; do
  [ -f "$d/foresay-256.png" ] && { icon_dir=$(cd "$d" && pwd); break; }
done
[ -n "$icon_dir" ] || { echo "install-desktop-entry: no icons found (looked in $here/icons and assets/icons)" >&2; exit 2; }
template=$here/foresay.desktop
[ -f "$template" ] || { echo "install-desktop-entry: $template is missing" >&2; exit 2; }

# The Exec key's quoting rules: the path in double quotes, with " ` $ \ escaped by a backslash.
quoted=$(printf '%s' "$exe" | sed -e 's/[\\"`$]/\\&/g')
mkdir -p "$apps" "$icons/scalable/apps"
sed -e "s|^Exec=.*|Exec=\"$quoted\"|" "$template" > "$apps/foresay.desktop.tmp"
mv "$apps/foresay.desktop.tmp" "$apps/foresay.desktop"
chmod 644 "$apps/foresay.desktop"
for s in "${sizes[@]}"; do
  [ -f "$icon_dir/foresay-$s.png" ] || continue
  mkdir -p "$icons/${s}x${s}/apps"
  install -m 644 "$icon_dir/foresay-$s.png" "$icons/${s}x${s}/apps/foresay.png"
done
[ -f "$icon_dir/foresay.svg" ] && install -m 644 "$icon_dir/foresay.svg" "$icons/scalable/apps/foresay.svg"
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$apps/foresay.desktop"; fi
refresh_caches
echo "installed the Foresay menu entry ($apps/foresay.desktop) running $exe"
