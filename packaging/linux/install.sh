#!/bin/sh
# Add ragdesk (this extracted folder) to your user's menu and PATH, or remove it again:
#   ./install.sh            menu entry, icon and ~/.local/bin/ragdesk
#   ./install.sh --uninstall
# Nothing is written into this folder; your data stays in ~/.local/share/ragdesk.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
bin=$HOME/.local/bin
apps=$data/applications
icons=$data/icons/hicolor

if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$apps/ragdesk.desktop" "$icons/256x256/apps/ragdesk.png" \
          "$icons/scalable/apps/ragdesk.svg"
    if [ -L "$bin/ragdesk" ]; then rm -f "$bin/ragdesk"; fi
    echo "Removed the menu entry and $bin/ragdesk (your data in $data/ragdesk is kept)."
    exit 0
fi

mkdir -p "$bin" "$apps" "$icons/256x256/apps" "$icons/scalable/apps"
ln -sfn "$here/ragdesk" "$bin/ragdesk"
cp "$here/ragdesk.png" "$icons/256x256/apps/ragdesk.png"
cp "$here/ragdesk.svg" "$icons/scalable/apps/ragdesk.svg"
sed "s|^Exec=ragdesk|Exec=\"$here/ragdesk\"|" "$here/ragdesk.desktop" > "$apps/ragdesk.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$apps" || true
echo "Installed: menu entry 'ragdesk' and $bin/ragdesk -> $here/ragdesk"
case ":$PATH:" in *":$bin:"*) ;; *) echo "Note: $bin is not on your PATH.";; esac
