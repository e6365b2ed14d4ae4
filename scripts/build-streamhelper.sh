#!/bin/sh
# Build minicri's streaming helper (oci/runtime/streamhelper/streamhelper.c) at
# dist/streamhelper/minicri-streamhelper: PTY exec, conmon attach and pod port connects.
# Static like the pause, with musl-gcc when present; CC overrides the choice.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/oci/runtime/streamhelper/streamhelper.c"
out_dir="$root/dist/streamhelper"
if [ -n "${CC:-}" ]; then cc=$CC
elif command -v musl-gcc >/dev/null 2>&1; then cc=musl-gcc
else cc=gcc
fi

mkdir -p "$out_dir"
tmp="$out_dir/.minicri-streamhelper.$$"
trap 'rm -f "$tmp"' EXIT
"$cc" -static -Os -Wall -Wextra -Werror -s -o "$tmp" "$src"
mv -f "$tmp" "$out_dir/minicri-streamhelper"
echo "built $out_dir/minicri-streamhelper"
