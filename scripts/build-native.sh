#!/bin/sh
# Builds minicri's small C programs as static binaries under dist/: the pause (it must run in an
# empty root filesystem), the streaming helper (PTY exec, conmon attach, connects inside a pod's
# netns) and the mount helper (mounts, unmounts and netns pins without a process each); and the two
# addons the daemon loads into itself (malloc_trim; posix_spawn and mknod), with the system's gcc against the
# running Node's headers.
# musl-gcc gives binaries of a few KiB; without it glibc's static libc works too.
# CC overrides the compiler. Each is built to a temp name and renamed, so a failure leaves no broken binary.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${CC:-}" ]; then cc=$CC
elif command -v musl-gcc >/dev/null 2>&1; then cc=musl-gcc
else cc=gcc
fi

# build SRC OUT COMPILER HINT FLAGS...: compiles SRC into OUT; HINT says what to install when the compiler fails.
build() {
  src="$root/$1"
  out="$root/$2"
  compiler=$3
  hint=$4
  shift 4
  mkdir -p "$(dirname "$out")"
  tmp="$out.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  "$compiler" "$@" -Wall -Wextra -Werror -s -o "$tmp" "$src" || {
    echo "build-native.sh: compiling ${src#"$root/"} with $compiler failed: $hint" >&2
    exit 1
  }
  mv -f "$tmp" "$out"
  echo "built $out"
}

static="install musl-tools (musl-gcc), or gcc and libc6-dev (glibc's static libc), or set CC to a C compiler that links statically"
build oci/runtime/pause/pause.c dist/pause/pause "$cc" "$static" -static -Os
build oci/runtime/streamhelper/streamhelper.c dist/streamhelper/minicri-streamhelper "$cc" "$static" -static -Os
build mounter/mounter.c dist/mounter/minicri-mounter "$cc" "$static" -static -Os

# The addons run inside Node, so they link against the C library Node does (glibc), not musl. The headers are those
# of the Node running npm (the one setup.sh installs), not of whatever node comes first in PATH.
node_include=$("${npm_node_execpath:-node}" -p "require('node:path').join(process.execPath, '..', '..', 'include', 'node')")
if [ ! -f "$node_include/node_api.h" ]; then
  echo "build-native.sh: no Node headers in $node_include: run the Node setup.sh installs (its tarball has them)" >&2
  exit 1
fi
build core/malloc-trim/malloc-trim.c dist/native/malloc-trim.node "${CC_ADDON:-gcc}" "install gcc and libc6-dev, or set CC_ADDON" \
  -shared -fPIC -O2 -I"$node_include"
build core/posix/posix.c dist/native/posix.node "${CC_ADDON:-gcc}" "install gcc and libc6-dev, or set CC_ADDON" \
  -shared -fPIC -O2 -pthread -I"$node_include"
