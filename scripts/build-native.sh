#!/bin/sh
# Builds minicri's small C programs as static binaries under dist/: the pause (it must run in an
# empty root filesystem), the streaming helper (PTY exec, conmon attach, connects inside a pod's
# netns) and the mount helper (mounts, unmounts and netns pins without a process each); and the one
# addon the daemon loads into itself (malloc_trim), with the system's gcc against the running Node's headers.
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
  "$cc" -static -Os -Wall -Wextra -Werror -s -o "$tmp" "$src" || {
    echo "build-native.sh: compiling $1 with $cc failed: install musl-tools (musl-gcc), or gcc and libc6-dev" \
      "(glibc's static libc), or set CC to a C compiler that links statically" >&2
    exit 1
  }
  mv -f "$tmp" "$out"
  echo "built $out"
}

build oci/runtime/pause/pause.c dist/pause/pause
build oci/runtime/streamhelper/streamhelper.c dist/streamhelper/minicri-streamhelper
build mounter/mounter.c dist/mounter/minicri-mounter

# The addon runs inside Node, so it links against the C library Node does (glibc), not musl. The headers are those
# of the Node running npm (the one setup.sh installs), not of whatever node comes first in PATH.
node_include=$("${npm_node_execpath:-node}" -p "require('node:path').join(process.execPath, '..', '..', 'include', 'node')")
if [ ! -f "$node_include/node_api.h" ]; then
  echo "build-native.sh: no Node headers in $node_include: run the Node setup.sh installs (its tarball has them)" >&2
  exit 1
fi
out="$root/dist/native/malloc-trim.node"
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
${CC_ADDON:-gcc} -shared -fPIC -O2 -Wall -Wextra -Werror -s -I"$node_include" -o "$tmp" "$root/core/malloc-trim/malloc-trim.c" || {
  echo "build-native.sh: compiling core/malloc-trim/malloc-trim.c failed: install gcc and libc6-dev, or set CC_ADDON" >&2
  exit 1
}
mv -f "$tmp" "$out"
echo "built $out"
