#!/bin/sh
# Build minicri's pause binary (oci/runtime/pause/pause.c) as a small static
# executable at dist/pause/pause. Static so it runs in an empty rootfs.
# musl-gcc (Debian: musl-tools) gives a ~15 KiB binary; without it, glibc
# static from libc6-dev works too (~700 KiB). CC overrides the choice.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/oci/runtime/pause/pause.c"
out_dir="$root/dist/pause"
if [ -n "${CC:-}" ]; then cc=$CC
elif command -v musl-gcc >/dev/null 2>&1; then cc=musl-gcc
else cc=gcc
fi

mkdir -p "$out_dir"
# Build to a temp name and rename, so a failed build never leaves a broken binary.
tmp="$out_dir/.pause.$$"
trap 'rm -f "$tmp"' EXIT
"$cc" -static -Os -Wall -Wextra -Werror -s -o "$tmp" "$src"
mv -f "$tmp" "$out_dir/pause"
echo "built $out_dir/pause"
