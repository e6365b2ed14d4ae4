#!/usr/bin/env bash
# Brings a Debian 12 machine to what minicri needs, builds it, then either starts the daemon
# (`setup.sh start`) or runs the whole test suite (`setup.sh test`). Run as root from a checkout.
# Only what is missing is installed, so running it again is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in start|test|install) ;; *) echo "usage: $0 start|test|install" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root (minicri manages namespaces, mounts and containers)" >&2; exit 1; }

say() { echo "setup.sh: $*"; }
# Every step that can fail runs through `step WHAT FIX COMMAND...`: its output goes to a log, and when it fails
# setup.sh names WHAT, shows the end of that output, keeps the whole of it in FULL_LOG and says FIX (a text, or
# the name of a function that reads the log to tell the likely cause), so it never ends without a word.
FULL_LOG=/var/log/minicri-setup.log
steplog=$(mktemp -t minicri-setup.XXXXXX)
scratch=("$steplog")
trap 'rm -rf "${scratch[@]}"' EXIT
step() {
  local what=$1 fix=$2 rc=0
  shift 2
  "$@" >"$steplog" 2>&1 || rc=$?
  [ "$rc" = 0 ] && return 0
  cp "$steplog" "$FULL_LOG" 2>/dev/null || true
  {
    echo "setup.sh: FAILED: $what (exit status $rc). The end of its output:"
    tail -n 25 "$steplog" | sed 's/^/  | /'
    echo "setup.sh: the whole output is in $FULL_LOG"
    if declare -F "$fix" >/dev/null; then echo "setup.sh: $("$fix")"; else echo "setup.sh: $fix"; fi
  } >&2
  exit 1
}
log_has() { grep -qiE "$1" "$steplog"; }
# What an npm fetch failure most likely means, from npm's own error codes in the log.
registry_fix() {
  if log_has 'UNABLE_TO_GET_ISSUER_CERT|SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF|CERT_[A-Z_]+|certificate'; then
    echo "the npm registry's certificate is not trusted here (a proxy or mirror with a local CA?): install that CA" \
      "in /usr/local/share/ca-certificates/ and run update-ca-certificates, or set NODE_EXTRA_CA_CERTS to a file" \
      "holding it; then run setup.sh again"
  elif log_has 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network'; then
    echo "the npm registry is unreachable: check the network, DNS and proxy (https_proxy), or set a reachable" \
      "mirror as npm's registry in /root/.npmrc; then run setup.sh again"
  elif log_has 'E404|ETARGET|No matching version'; then
    echo "the npm registry has no such package or version: with a mirror, check that it carries it; a changed" \
      "scripts/node-version must name released versions"
  else
    echo "the npm registry is unreachable or its certificate is not trusted: install your CA in" \
      "/usr/local/share/ca-certificates/ and run update-ca-certificates (or set NODE_EXTRA_CA_CERTS), or set a" \
      "reachable registry in /root/.npmrc; then run setup.sh again"
  fi
}
npm_ci_fix() {
  if log_has 'ENOSPC'; then echo "the disk is full: make room (df -h $PWD /root/.npm) and run setup.sh again"
  else registry_fix
  fi
}

# What the daemon runs: the OCI runtime, the container monitor, CRIU (for CheckpointContainer), CNI plugins,
# namespace and firewall tools, a C toolchain for the built-in pause and helper binaries (better-sqlite3, the one
# native addon, comes built), and AppArmor's tools where the kernel enforces AppArmor (minicri loads its profiles
# with apparmor_parser), and libatomic1, which the official Node.js binary links. The tests add a registry, busybox
# and zstd for test images.
runtime_packages=(runc conmon criu containernetworking-plugins iproute2 iptables util-linux gcc libc6-dev musl-tools ca-certificates libatomic1)
[ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ] && runtime_packages+=(apparmor)
# busybox (dynamic) rather than busybox-static: the two conflict, and its sh looks applets up in PATH.
# systemd-container: the unit test boots the shipped unit under a real systemd (systemd-nspawn). apparmor: the unit
# tests check minicri's profiles with apparmor_parser on any kernel. kubectl for the streaming interop tests:
# Debian's kubernetes-client, unless a kubectl is on PATH already (their files collide). nftables: the leak check
# lists nft tables with nft, and fails when it cannot.
test_packages=(docker-registry busybox openssl zstd apache2-utils systemd systemd-container e2fsprogs apparmor nftables $(command -v kubectl >/dev/null || echo kubernetes-client))
# With systemd as PID 1, the systemd cgroup driver (runc's and conmon's) talks to it over D-Bus.
[ -d /run/systemd/system ] && runtime_packages+=(dbus)
# The kind-style node test (test/node/) builds a Debian 12 node with debootstrap and boots it with systemd-nspawn;
# the VM node test builds a Debian 12 disk with debootstrap too, boots it with qemu (SeaBIOS, no UEFI firmware) and
# drives it over ssh.
node_test_packages=(debootstrap qemu-system-x86 qemu-utils openssh-client)
packages=("${runtime_packages[@]}")
[ "$mode" = test ] && packages+=("${test_packages[@]}" "${node_test_packages[@]}")

# One Node.js for minicri everywhere: exactly the release scripts/node-version pins, in $MINICRI_NODE, whatever
# node the system has (Debian 12's is 18, or none). The official binary (the npm registry's node-linux-<arch>
# package) and npm are fetched with the system's npm (Debian's, installed when there is none), and the build,
# npm ci, the tests, /usr/local/bin/minicri and so the systemd unit use it.
MINICRI_NODE=/usr/local/lib/minicri/node
node_pin=$(sed -n 's/^node=//p' scripts/node-version)
npm_pin=$(sed -n 's/^npm=//p' scripts/node-version)
[ -n "$node_pin" ] && [ -n "$npm_pin" ] || { echo "setup.sh: scripts/node-version names no node= or npm= version" >&2; exit 1; }
# Its headers too: build-native.sh compiles the malloc_trim addon against them.
node_is_pinned() {
  [ -f "$MINICRI_NODE/include/node/node_api.h" ] &&
    [ "$("$MINICRI_NODE/bin/node" --version 2>/dev/null)" = "v$node_pin" ] &&
    [ "$("$MINICRI_NODE/bin/node" "$MINICRI_NODE/lib/node_modules/npm/bin/npm-cli.js" --version 2>/dev/null)" = "$npm_pin" ]
}
node_is_pinned || command -v npm >/dev/null || packages+=(nodejs npm)
# The sha512 integrity scripts/node-version pins for package $1 (the form npm reports), or a clear failure.
pinned_integrity() {
  local want
  want=$(sed -n "s/^integrity\.$1=//p" scripts/node-version)
  [ -n "$want" ] || { echo "setup.sh: scripts/node-version pins no integrity for $1 (add integrity.$1= with what" \
    "npm view $1@<version> dist.integrity reports, after checking it)" >&2; exit 1; }
  echo "$want"
}
# Fails unless the fetched package $2 has the integrity pinned for $1: a package that differs is never unpacked.
check_integrity() {
  local want got
  want=$(pinned_integrity "$1")
  got="sha512-$(openssl dgst -sha512 -binary "$2" | base64 -w0)" || got="unreadable (npm pack left no such file)"
  [ "$got" = "$want" ] || { echo "setup.sh: the fetched $1 package ($(basename "$2")) has integrity $got, not the" \
    "$want scripts/node-version pins: it is not the release pinned (a changed registry, mirror or npm cache?)," \
    "so nothing was installed" >&2; exit 1; }
}
# Both nodes trust the system's CA bundle (with local CAs from update-ca-certificates), for the fetch and at run
# time: the official binary otherwise trusts only its own list.
export NODE_EXTRA_CA_CERTS="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${#missing[@]} Debian packages: ${missing[*]}"
  step "apt-get update" "Debian's mirror is unreachable, or a source in /etc/apt/sources.list(.d) is wrong or not \
signed by a key apt has: check the network and any proxy (Acquire::http::Proxy), then run setup.sh again" \
    apt-get update
  step "apt-get install of ${missing[*]}" "apt could not install them (see its message above): a package your \
sources do not carry (all are in Debian 12's main), dpkg interrupted before (run dpkg --configure -a), or a full \
disk (df -h /var)" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

if ! node_is_pinned; then
  case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "setup.sh: no Node.js package for $(uname -m)" >&2; exit 1 ;; esac
  pinned_integrity "node-linux-$arch" >/dev/null && pinned_integrity npm >/dev/null
  say "fetching Node.js $node_pin and npm $npm_pin for minicri into $MINICRI_NODE (now: $("$MINICRI_NODE/bin/node" --version 2>/dev/null || echo none))"
  fetched=$(mktemp -d) && scratch+=("$fetched" "$MINICRI_NODE.new")
  # npm's cache keeps the packages: a second fetch of the same versions needs no network.
  step "fetching node-linux-$arch@$node_pin and npm@$npm_pin with $(command -v npm)" registry_fix \
    npm pack --prefer-offline --no-audit --no-fund --pack-destination "$fetched" "node-linux-$arch@$node_pin" "npm@$npm_pin"
  check_integrity "node-linux-$arch" "$fetched/node-linux-$arch-$node_pin.tgz"
  check_integrity npm "$fetched/npm-$npm_pin.tgz"
  rm -rf "$MINICRI_NODE.new" && mkdir -p "$MINICRI_NODE.new/lib/node_modules/npm"
  step "unpacking Node.js into $MINICRI_NODE.new" "the packages in $fetched did not unpack: a full disk (df -h $fetched /usr/local)?" \
    sh -c 'tar -xzf "$1"/node-linux-*.tgz -C "$2" --strip-components=1 package/bin package/include &&
      tar -xzf "$1"/npm-*.tgz -C "$2/lib/node_modules/npm" --strip-components=1' - "$fetched" "$MINICRI_NODE.new"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$MINICRI_NODE.new/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$MINICRI_NODE.new/bin/npx"
  step "running the fetched Node.js" "the official Node.js $node_pin binary does not run here: it needs glibc 2.28 or \
newer (Debian 10 and later)" "$MINICRI_NODE.new/bin/node" --version
  rm -rf "$MINICRI_NODE" && mv "$MINICRI_NODE.new" "$MINICRI_NODE"
fi
export PATH="$MINICRI_NODE/bin:$PATH"

# npm ci only when the lock file (or the node, whose ABI native addons follow) changed since the last install.
lock_sum="$(sha256sum package-lock.json | cut -d' ' -f1) $(node --version)"
if [ "$(cat node_modules/.minicri-lock 2>/dev/null)" != "$lock_sum" ]; then
  say "npm ci: installing minicri's dependencies into node_modules"
  step "npm ci" npm_ci_fix npm ci --prefer-offline --no-audit --no-fund
  echo "$lock_sum" > node_modules/.minicri-lock
fi
say "building minicri (TypeScript and the C helpers)"
step "the build (npm run build)" "see the output above (build-native.sh names a missing compiler); run npm run build \
to repeat it; a checkout with local changes may not compile" npm run --silent build
# main.js starts with "#!/usr/bin/env node": minicri's node must come first in PATH, wherever minicri is started
# from. It trusts the system's CAs (registries behind a local CA).
printf '#!/bin/sh\n# minicri on the Node.js setup.sh installed for it in %s\n: "${NODE_EXTRA_CA_CERTS:=/etc/ssl/certs/ca-certificates.crt}"\nexport NODE_EXTRA_CA_CERTS\nPATH=%s/bin:$PATH exec %s "$@"\n' \
  "$MINICRI_NODE" "$MINICRI_NODE" "'$PWD/dist/server/main.js'" > /usr/local/bin/minicri.new
chmod 0755 /usr/local/bin/minicri.new && mv -f /usr/local/bin/minicri.new /usr/local/bin/minicri

case "$mode" in
  test)
    # The checkpoint tests need a CRIU that passes `criu check`; Debian 12's 3.17 fails it on kernels from 6.13 on.
    # Then the CRIU 4.2 source beside the checkout (../shared/criu) is built once into /usr/local/lib/criu-4.2,
    # where the tests look for it (test/support/criu.ts).
    if ! criu check >/dev/null 2>&1 && [ -f ../shared/criu/build.sh ]; then
      say "the system's CRIU fails 'criu check': building CRIU 4.2 for the checkpoint tests (about 4 minutes, once)"
      step "building CRIU 4.2 (../shared/criu/build.sh)" \
        "its build dependencies come from Debian's archive: check apt (the output above), then run setup.sh again" \
        bash ../shared/criu/build.sh
      export MINICRI_TEST_CRIU=/usr/local/lib/criu-4.2/sbin/criu
    fi
    npm test --silent
    npm run --silent test:node
    # exec skips the EXIT trap: the step log goes first.
    rm -rf "${scratch[@]}"
    exec npm run --silent test:vm
    ;;
  start)
    if [ -d /run/systemd/system ]; then
      install -m 0644 systemd/minicri.service /etc/systemd/system/minicri.service
      systemctl daemon-reload
      systemctl enable --quiet minicri
      # A restart puts a new build in place; pods keep running across it (the unit's KillMode=process).
      systemctl restart minicri
      # A slow node (an emulated VM loads the daemon's modules in 15 s) may take a minute or more to serve.
      say "waiting for minicri to serve on /run/minicri/minicri.sock (up to 5 minutes)"
      for _ in $(seq 1500); do [ -S /run/minicri/minicri.sock ] && break; systemctl is-failed --quiet minicri && break; sleep 0.2; done
      systemctl is-active --quiet minicri && [ -S /run/minicri/minicri.sock ] \
        || { echo "minicri did not start: systemctl status minicri; journalctl -u minicri" >&2; exit 1; }
      echo "minicri started by systemd: systemctl status minicri; journalctl -u minicri"
    else
      # No systemd as PID 1 (containers, some VMs): run it detached, logging to a file.
      if [ -S /run/minicri/minicri.sock ] && pgrep -f 'minicri/dist/server/main.js|/usr/local/bin/minicri' >/dev/null; then
        echo "minicri is already running"
      else
        nohup /usr/local/bin/minicri serve >>/var/log/minicri.log 2>&1 < /dev/null &
        say "waiting for minicri to serve on /run/minicri/minicri.sock (up to 5 minutes)"
        for _ in $(seq 1500); do [ -S /run/minicri/minicri.sock ] && break; kill -0 $! 2>/dev/null || break; sleep 0.2; done
        [ -S /run/minicri/minicri.sock ] || { echo "minicri did not start; see /var/log/minicri.log" >&2; exit 1; }
        echo "minicri started (pid $!), logging to /var/log/minicri.log"
      fi
    fi
    echo "socket: unix:///run/minicri/minicri.sock"
    ;;
esac
