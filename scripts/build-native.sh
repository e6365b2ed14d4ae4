#!/bin/sh
# Builds minicri's small C programs as static binaries under dist/: the pause (it must run in an
# empty root filesystem), the streaming helper (PTY exec, conmon attach, connects inside a pod's
# netns) and the mount helper (mounts, unmounts and netns pins without a process each); and, on a
# Node without its own zstd, the zstd addon.
# musl-gcc gives binaries of a few KiB; without it glibc's static libc works too.
# CC overrides the compiler. Each is built to a temp name and renamed, so a failure leaves no broken binary.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${CC:-}" ]; then cc=$CC
elif command -v musl-gcc >/dev/null 2>&1; then cc=musl-gcc
else cc=gcc
fi

build() {
  src="$root/$1"
  out="$root/$2"
  mkdir -p "$(dirname "$out")"
  tmp="$out.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  "$cc" -static -Os -Wall -Wextra -Werror -s -o "$tmp" "$src"
  mv -f "$tmp" "$out"
  echo "built $out"
}

build oci/runtime/pause/pause.c dist/pause/pause
build oci/runtime/streamhelper/streamhelper.c dist/streamhelper/minicri-streamhelper
build mounter/mounter.c dist/mounter/minicri-mounter

# zstd layers on a Node without zstd of its own (before 22.15): libzstd through a small addon, against the
# headers of the node that runs it (setup.sh's nodedir, else the ones beside the binary). gcc, not musl-gcc: it
# is loaded into node.
if ! node -e 'process.exit(require("zlib").createZstdDecompress ? 0 : 1)'; then
  headers=${npm_config_nodedir:-$(node -p 'require("path").resolve(process.execPath, "../..")')}/include/node
  out="$root/dist/zstd/zstd-stream.node"
  mkdir -p "$(dirname "$out")"
  tmp="$out.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  gcc -shared -fPIC -O2 -Wall -Wextra -Werror -DNODE_GYP_MODULE_NAME=zstd_stream -I"$headers" -o "$tmp" "$root/oci/image/zstd-native/zstd-stream.c" -lzstd
  mv -f "$tmp" "$out"
  echo "built $out"
fi
