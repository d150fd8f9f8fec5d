#!/usr/bin/env bash
# Build the Linux bundle and installers from a clean clone and check that they work on a
# machine without Python:
#   packaging/check_bundle.sh                    clone this repository's HEAD into a temp dir
#   packaging/check_bundle.sh --repo URL|PATH    clone that repository instead
#   packaging/check_bundle.sh --copy DIR         copy DIR's files that git tracks or would
#                                                track (no build/, dist/, .venv/) into a temp
#                                                dir: a clean checkout of uncommitted work
#   packaging/check_bundle.sh --src DIR          build in DIR as it is
# Options: --python PY (the environment to bundle; default: .venv/bin/python of this
# checkout, or $PYTHON), --skip-build (check DIR/dist as it is), --no-screenshot, --keep.
#
# Checks, from outside the source tree with an empty PATH (no python reachable) and a fresh
# HOME, on the .deb(s) unpacked with `dpkg-deb -x` and the .tar archives unpacked with tar (the
# app alone, then with the starter generator add-on when the build made one):
# `ragdesk --version` and `ragdesk --self-test` (QT_QPA_PLATFORM=offscreen) pass; user data
# goes to ~/.local/share/ragdesk like a pip install's; the bundled starter retriever encodes a
# small Vital Articles snapshot that then verifies; nothing is written into the install
# folder; the GUI resources are in place; no CUDA libraries, test folders or Python
# interpreter are bundled; the .desktop file validates; and the app opens its main window
# (with that snapshot) under Xvfb (screenshot to docs/screenshots/bundle-main-window.png of
# this checkout).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
repo=$here
src=""
copy_from=""
py=${PYTHON:-$here/.venv/bin/python}
build=1
screenshot=1
keep=0
while [ $# -gt 0 ]; do
    case $1 in
        --repo) repo=$2; shift 2 ;;
        --src) src=$(cd "$2" && pwd); shift 2 ;;
        --copy) copy_from=$(cd "$2" && pwd); shift 2 ;;
        --python) py=$2; shift 2 ;;
        --skip-build) build=0; shift ;;
        --no-screenshot) screenshot=0; shift ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

work=$(mktemp -d /tmp/ragdesk-check.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ "$keep" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

failures=0
pass() { printf 'PASS  %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures=$((failures + 1)); }
step() { printf '\n== %s\n' "$*"; }

if [ -n "$copy_from" ]; then
    step "copy the git-visible files of $copy_from"
    mkdir -p "$work/src"
    (cd "$copy_from" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 cp --parents -t "$work/src" 2>/dev/null || true)
    src=$work/src
    echo "$(cd "$src" && find . -type f | wc -l) files"
elif [ -z "$src" ]; then
    step "clone $repo"
    git clone --quiet "$repo" "$work/src"
    src=$work/src
    git -C "$src" log -1 --format='%h %s'
fi
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$src/ragdesk/_version.py")

if [ "$build" = 1 ]; then
    step "build with $py"
    start=$(date +%s)
    (cd "$src" && nice -n 10 "$py" packaging/build.py)
    echo "build took $(( $(date +%s) - start )) s"
fi

dist=$src/dist
deb=$(ls "$dist"/ragdesk_"$version"_*.deb)
gen_deb=$(ls "$dist"/ragdesk-starter-generator_"$version"_all.deb 2>/dev/null || true)
tarball=$(ls "$dist"/ragdesk-"$version"-linux-*.tar.xz)
gen_tar=$(ls "$dist"/ragdesk-starter-generator-"$version".tar.gz 2>/dev/null || true)
step "artifacts"
du -sh --apparent-size "$dist/ragdesk" $deb $gen_deb $tarball $gen_tar

# An environment with no Python in reach: PATH holds one empty folder.
mkdir -p "$work/empty-bin" "$work/home" "$work/run"
clean_env() {
    env -i HOME="$work/home" PATH="$work/empty-bin" LANG=C.UTF-8 \
        XDG_RUNTIME_DIR="$work/run" "$@"
}
if clean_env /bin/sh -c 'command -v python3 || command -v python' >/dev/null; then
    fail "a python is reachable from the clean environment"
else
    pass "no python on PATH in the clean environment"
fi
selftest() {  # selftest LABEL LAUNCHER EXPECTED-STARTER-TEXT
    if clean_env QT_QPA_PLATFORM=offscreen "$2" --self-test >"$work/selftest.txt" 2>&1; then
        pass "$1 --self-test"
    else
        fail "$1 --self-test"
    fi
    grep -E '^(ok  |FAIL) ' "$work/selftest.txt" || cat "$work/selftest.txt"
    if grep -q "^ok   starter: .*$3" "$work/selftest.txt"; then
        pass "$1 starter pack: $3"
    else
        fail "$1 starter pack is not '$3'"
    fi
}

step "install the .deb into a scratch root"
root=$work/deb-root
dpkg-deb -x "$deb" "$root"
dpkg-deb -f "$deb" Package Version Architecture Installed-Size Depends Recommends
launcher=$root/usr/bin/ragdesk
install_dir=$root/opt/ragdesk

cd "$work"  # outside the source tree from here on

out=$(clean_env QT_QPA_PLATFORM=offscreen "$launcher" --version 2>&1) || true
if [ "$out" = "ragdesk $version" ]; then pass "--version: $out"; else fail "--version: $out"; fi

if [ -n "$gen_deb" ]; then
    step "self-test of the app package alone (the generator is an add-on)"
    selftest ".deb without generator" "$launcher" "is not installed"
    step "add the generator package"
    dpkg-deb -x "$gen_deb" "$root"
fi
snapshot() { (cd "$1" && find . -printf '%p %s %T@ %m\n' | LC_ALL=C sort); }
snapshot "$install_dir" > "$work/before.txt"

step "self-test (.deb, through the /usr/bin symlink)"
selftest ".deb" "$launcher" "generator chunks and Vital Articles found"

step "user data goes to the platformdirs folder"
clean_env QT_QPA_PLATFORM=offscreen "$launcher" index list || true
if [ -f "$work/home/.local/share/ragdesk/catalog.sqlite" ]; then
    pass "catalog created in \$HOME/.local/share/ragdesk"
else
    fail "no catalog in \$HOME/.local/share/ragdesk"
fi

step "a small starter snapshot, encoded by the bundled retriever"
# The self-test builds its models from configs; this loads the real all-MiniLM-L6-v2 through
# AutoTokenizer / AutoModel, which needs the model packages and metadata the spec keeps.
if clean_env "$launcher" index import vital-articles --name starter --limit 100 \
        >"$work/import.txt" 2>&1 \
        && clean_env "$launcher" index verify starter >>"$work/import.txt" 2>&1; then
    pass "vital-articles import (100 passages) and verify: $(tail -1 "$work/import.txt")"
else
    fail "vital-articles import or verify"; tail -20 "$work/import.txt"
fi

snapshot "$install_dir" > "$work/after.txt"
if diff -q "$work/before.txt" "$work/after.txt" >/dev/null; then
    pass "nothing written inside the install folder"
else
    fail "the install folder changed:"; diff "$work/before.txt" "$work/after.txt" | head -20
fi

step "bundle contents"
cuda=$(find "$install_dir" -regextype posix-extended -regex \
    '.*/lib(cuda|cudart|cudnn|cublas|cufft|curand|cusparse|cusolver|nccl|nvrtc|torch_cuda)[^/]*' \
    | head -5)
if [ -z "$cuda" ]; then pass "no CUDA libraries"; else fail "CUDA libraries: $cuda"; fi
# License texts keep their upstream paths (torch's third_party/.../test/LICENSE): not tests.
tests=$(find "$install_dir" -type d \( -name tests -o -name test \) \
    -not -path "$install_dir/licenses/*" -not -path '*.dist-info/licenses/*' | head -5)
if [ -z "$tests" ]; then pass "no test folders"; else fail "test folders: $tests"; fi
pythons=$(find "$install_dir" -type f -name 'python3*' -perm -u+x | head -5)
if [ -z "$pythons" ]; then pass "no python executable"; else fail "python executables: $pythons"; fi
resources=$install_dir/_internal/ragdesk/resources
icons=$(ls "$resources"/icons/*.svg 2>/dev/null | wc -l)
if [ -s "$resources/ragdesk.qss" ] && [ "$icons" -gt 10 ]; then
    pass "GUI resources in _internal/ragdesk/resources ($icons icons, stylesheet)"
else
    fail "GUI resources missing from $resources"
fi
if [ -s "$install_dir/licenses/README.txt" ] && [ "$(ls "$install_dir/licenses" | wc -l)" -gt 20 ]; then
    pass "licenses/ ($(ls "$install_dir/licenses" | wc -l) entries)"
else
    fail "licenses/ is missing or nearly empty"
fi
if command -v desktop-file-validate >/dev/null; then
    if desktop-file-validate "$root/usr/share/applications/ragdesk.desktop"; then
        pass "desktop-file-validate"
    else
        fail "desktop-file-validate"
    fi
fi

step "the .tar.xz, extracted elsewhere"
mkdir -p "$work/tar"
tar -xf "$tarball" -C "$work/tar"
if [ -n "$gen_tar" ]; then tar -xf "$gen_tar" -C "$work/tar"; fi
tar_app=$(ls -d "$work"/tar/ragdesk-*/)ragdesk
out=$(clean_env QT_QPA_PLATFORM=offscreen "$tar_app" --version 2>&1) || true
if [ "$out" = "ragdesk $version" ]; then pass "tar.xz --version"; else fail "tar.xz --version: $out"; fi
selftest "tar.xz" "$tar_app" "generator chunks and Vital Articles found"

if [ "$screenshot" = 1 ]; then
    step "main window under Xvfb"
    display=:$(( 90 + RANDOM % 9 ))
    Xvfb "$display" -screen 0 1440x900x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
    pids+=($!)
    sleep 2
    clean_env DISPLAY="$display" QT_QPA_PLATFORM=xcb "$launcher" >"$work/gui.log" 2>&1 &
    app_pid=$!
    pids+=("$app_pid")
    if win=$(DISPLAY=$display timeout 180 xdotool search --sync --onlyvisible --name '^ragdesk' \
            | head -1) && [ -n "$win" ]; then
        # No window manager: the window keeps its own size; make it fill the screen and grab
        # the window itself (a root grab would have black margins).
        DISPLAY=$display xdotool windowsize "$win" 1440 900
        sleep 15  # let the first paint and the snapshot loading settle
        shot=$here/docs/screenshots/bundle-main-window.png
        mkdir -p "$(dirname "$shot")"
        DISPLAY=$display import -window "$win" "$shot"
        pass "main window shown ($(DISPLAY=$display xdotool getwindowname "$win")); screenshot $shot"
    else
        fail "no ragdesk window within 180 s"; tail -20 "$work/gui.log"
    fi
    kill "$app_pid" 2>/dev/null || true
fi

step "summary"
if [ "$failures" = 0 ]; then echo "all checks passed"; else echo "$failures check(s) failed"; fi
[ "$failures" = 0 ]
