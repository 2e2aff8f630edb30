#!/bin/sh
# prune-code-server DIR: removes from code-server's install tree (DIR, the npm package's directory)
# what can never run on this machine: other platforms' prebuilt binaries and node-gyp's
# intermediate build files. Nothing that Linux on this architecture could load is touched (about
# 150 MB of 630 MB saved). Both builders run it: the Dockerfile and scripts/build-workspace-image.sh.
set -eu
dir="$1"
[ -f "$dir/out/node/entry.js" ] || { echo "prune-code-server: $dir is not code-server's install tree" >&2; exit 1; }
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) arch="$(uname -m)" ;;
esac
cd "$dir"

# node-gyp's object files, dependency lists and makefiles (the .node files in build/Release stay).
find . -type d -path '*/build/Release' | while read -r release; do
  rm -rf "$release/obj.target" "$release/.deps" "$release/obj"
  rm -f "${release%/Release}/Makefile" "${release%/Release}/config.gypi" "${release%/Release}"/*.mk
done

# Prebuilt binaries for other systems and architectures (musl ones too: Debian is glibc).
find . -type d -path '*/prebuilds/*' \
  \( -name 'darwin-*' -o -name 'win32-*' -o -name 'freebsd-*' -o -name 'openbsd-*' -o -name 'android-*' \
     -o \( -name 'linux-*' ! -name "linux-$arch" \) \) -prune -exec rm -rf {} +
find . -type f -path '*/prebuilds/*' -name '*musl*.node' -exec rm -f {} +
find . -type d -path '*/@koromix/koffi-*/musl_*' -prune -exec rm -rf {} +
find . -type f -name '*.win32-*.node' -exec rm -f {} +

# ripgrep for every platform: keep this one.
for rg in lib/vscode/node_modules/@vscode/ripgrep-universal/bin/*; do
  [ -d "$rg" ] || continue
  [ "${rg##*/}" = "linux-$arch" ] || rm -rf "$rg"
done

# Microsoft's sandbox helpers: Windows and macOS executables, and the other architecture's copy.
mxc=lib/vscode/node_modules/@microsoft/mxc-sdk/bin
if [ -d "$mxc" ]; then
  for d in "$mxc"/*; do
    [ -d "$d" ] || continue
    [ "${d##*/}" = "$arch" ] || rm -rf "$d"
  done
  find "$mxc" -type f \( -name '*.exe' -o -name '*.dll' -o -name '*-mac' \) -exec rm -f {} +
fi
