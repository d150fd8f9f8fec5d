#!/bin/bash
# Make the macOS disk image from the PyInstaller build. Run on macOS, from anywhere, after
#   python packaging/build.py          (writes dist/ragdesk.app and dist/ragdesk/)
# Output: dist/ragdesk-VERSION-macos-ARCH.dmg with ragdesk.app and an /Applications link.
#
# Signing: set CODESIGN_IDENTITY="Developer ID Application: ..." to sign with a Developer ID
# (hardened runtime); otherwise the app is re-signed ad hoc, which runs on the build Mac
# and, after the user allows it in System Settings > Privacy & Security, on others.
# Notarization (optional, needs an Apple developer account):
#   xcrun notarytool submit dist/ragdesk-*.dmg --keychain-profile PROFILE --wait
#   xcrun stapler staple dist/ragdesk-*.dmg
#
# Written against the hdiutil(1) and codesign(1) manual pages; not run on the machine that
# wrote it (see packaging/README.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' ragdesk/_version.py)
app=dist/ragdesk.app
[ -d "$app" ] || { echo "no $app: run python packaging/build.py first" >&2; exit 1; }

# The spec writes licenses/ next to the one-folder build; the .app carries them too.
rm -rf "$app/Contents/Resources/licenses"
cp -R dist/ragdesk/licenses "$app/Contents/Resources/licenses"

# Adding files changed the bundle, so its signature is renewed (ad hoc unless an identity
# is given).
if [ -n "${CODESIGN_IDENTITY:-}" ]; then
    codesign --force --deep --options runtime --timestamp --sign "$CODESIGN_IDENTITY" "$app"
else
    codesign --force --deep --sign - "$app"
fi
codesign --verify --deep --strict "$app"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -R "$app" "$stage/"
ln -s /Applications "$stage/Applications"
out="dist/ragdesk-$version-macos-$(uname -m).dmg"
# UDZO (zlib) opens on every supported macOS; ULMO (lzma, macOS 10.15+) is a little smaller.
hdiutil create -volname "ragdesk $version" -srcfolder "$stage" -fs HFS+ \
    -format UDZO -imagekey zlib-level=9 -ov "$out"
hdiutil verify "$out"
ls -l "$out"
