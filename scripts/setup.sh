#!/usr/bin/env bash
# Brings a Debian 12 machine to what minicri needs, builds it, then either starts the daemon
# (`setup.sh start`) or runs the whole test suite (`setup.sh test`). Run as root from a checkout.
# Only what is missing is installed, so running it again is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in start|test|install) ;; *) echo "usage: $0 start|test|install" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root (minicri manages namespaces, mounts and containers)" >&2; exit 1; }

# What the daemon runs: the OCI runtime, the container monitor, CRIU (for CheckpointContainer), CNI plugins,
# namespace and firewall tools, a C toolchain for the built-in pause binary and (with libzstd's headers) the
# zstd addon, make, g++ and python3 for npm's native addons (better-sqlite3), and apparmor_parser, which loads
# minicri's default AppArmor profile (and which the unit tests compile it with, AppArmor in the kernel or not).
# The tests add a registry, busybox and zstd for test images.
runtime_packages=(runc conmon criu containernetworking-plugins iproute2 iptables util-linux gcc libc6-dev libzstd-dev musl-tools ca-certificates make g++ python3 apparmor)
# busybox (dynamic) rather than busybox-static: the two conflict, and its sh looks applets up in PATH.
# systemd-container: the unit test boots the shipped unit under a real systemd (systemd-nspawn). kubectl for the
# streaming interop tests: Debian's kubernetes-client, unless a kubectl is on PATH already (their files collide).
test_packages=(docker-registry busybox openssl zstd apache2-utils systemd systemd-container e2fsprogs $(command -v kubectl >/dev/null || echo kubernetes-client))
# With systemd as PID 1, the systemd cgroup driver (runc's and conmon's) talks to it over D-Bus.
[ -d /run/systemd/system ] && runtime_packages+=(dbus)
# The kind-style node test (test/node/) builds a Debian 12 node with debootstrap and boots it with systemd-nspawn.
node_test_packages=(debootstrap)
packages=("${runtime_packages[@]}")
[ "$mode" = test ] && packages+=("${test_packages[@]}" "${node_test_packages[@]}")

# minicri and its dependencies need Node.js 20 or newer; Debian 12's own is 18. When the node on PATH is older,
# setup.sh puts the official Node.js binary (the npm registry's node-linux-<arch> package, with its headers for
# native addons) and npm into $MINICRI_NODE for minicri alone, and everything below uses it: npm ci, the build, the
# tests, /usr/local/bin/minicri and so the systemd unit. The system's node stays as it is. Debian's npm fetches them.
MINICRI_NODE=/usr/local/lib/minicri/node
MINICRI_NODE_SPEC=22 MINICRI_NPM_SPEC=11
node_ok() { "$1" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; }
[ -x "$MINICRI_NODE/bin/node" ] && export PATH="$MINICRI_NODE/bin:$PATH"
node_ok node || command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! node_ok node; then
  case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "setup.sh: no Node.js package for $(uname -m)" >&2; exit 1 ;; esac
  echo "setup.sh: the system's node is $(node --version); installing Node.js $MINICRI_NODE_SPEC for minicri in $MINICRI_NODE"
  fetched=$(mktemp -d)
  (cd "$fetched" && npm pack --silent --no-audit --no-fund "node-linux-$arch@$MINICRI_NODE_SPEC" "npm@$MINICRI_NPM_SPEC" >/dev/null)
  rm -rf "$MINICRI_NODE.new" && mkdir -p "$MINICRI_NODE.new/lib/node_modules/npm"
  tar -xzf "$fetched"/node-linux-"$arch"-*.tgz -C "$MINICRI_NODE.new" --strip-components=1 package/bin package/include
  tar -xzf "$fetched"/npm-*.tgz -C "$MINICRI_NODE.new/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$MINICRI_NODE.new/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$MINICRI_NODE.new/bin/npx"
  rm -rf "$fetched"
  node_ok "$MINICRI_NODE.new/bin/node" || { echo "setup.sh: the Node.js fetched into $MINICRI_NODE.new does not run" >&2; exit 1; }
  rm -rf "$MINICRI_NODE" && mv "$MINICRI_NODE.new" "$MINICRI_NODE"
  export PATH="$MINICRI_NODE/bin:$PATH"
fi
if [ "$(command -v node)" = "$MINICRI_NODE/bin/node" ]; then
  # Native addons (better-sqlite3) build against the headers of the node that runs them, with nothing to download.
  export npm_config_nodedir="$MINICRI_NODE"
  # The official binary trusts only its own CA list; Debian's node trusts the system's (with local CAs): so does this.
  export NODE_EXTRA_CA_CERTS="${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
fi

# npm ci only when the lock file (or the node, whose ABI native addons follow) changed since the last install.
lock_sum="$(sha256sum package-lock.json | cut -d' ' -f1) $(node --version)"
if [ "$(cat node_modules/.minicri-lock 2>/dev/null)" != "$lock_sum" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" > node_modules/.minicri-lock
fi
npm run --silent build
if [ "$(command -v node)" = "$MINICRI_NODE/bin/node" ]; then
  # main.js starts with "#!/usr/bin/env node": this node must come first in PATH, wherever minicri is started from.
  # It trusts the system's CAs (registries behind a local CA), as Debian's node does.
  printf '#!/bin/sh\n# minicri on the Node.js setup.sh installed for it in %s\n: "${NODE_EXTRA_CA_CERTS:=/etc/ssl/certs/ca-certificates.crt}"\nexport NODE_EXTRA_CA_CERTS\nPATH=%s/bin:$PATH exec %s "$@"\n' \
    "$MINICRI_NODE" "$MINICRI_NODE" "'$PWD/dist/server/main.js'" > /usr/local/bin/minicri.new
  chmod 0755 /usr/local/bin/minicri.new && mv -f /usr/local/bin/minicri.new /usr/local/bin/minicri
else
  ln -sfn "$PWD/dist/server/main.js" /usr/local/bin/minicri
fi

case "$mode" in
  test)
    npm test --silent
    exec npm run --silent test:node
    ;;
  start)
    if [ -d /run/systemd/system ]; then
      install -m 0644 systemd/minicri.service /etc/systemd/system/minicri.service
      systemctl daemon-reload
      systemctl enable --quiet minicri
      # A restart puts a new build in place; pods keep running across it (the unit's KillMode=process).
      systemctl restart minicri
      for _ in $(seq 100); do [ -S /run/minicri/minicri.sock ] && break; sleep 0.2; done
      systemctl is-active --quiet minicri && [ -S /run/minicri/minicri.sock ] \
        || { echo "minicri did not start: systemctl status minicri; journalctl -u minicri" >&2; exit 1; }
      echo "minicri started by systemd: systemctl status minicri; journalctl -u minicri"
    else
      # No systemd as PID 1 (containers, some VMs): run it detached, logging to a file.
      if [ -S /run/minicri/minicri.sock ] && pgrep -f 'minicri/dist/server/main.js|/usr/local/bin/minicri' >/dev/null; then
        echo "minicri is already running"
      else
        nohup /usr/local/bin/minicri serve >>/var/log/minicri.log 2>&1 < /dev/null &
        for _ in $(seq 50); do [ -S /run/minicri/minicri.sock ] && break; sleep 0.2; done
        [ -S /run/minicri/minicri.sock ] || { echo "minicri did not start; see /var/log/minicri.log" >&2; exit 1; }
        echo "minicri started (pid $!), logging to /var/log/minicri.log"
      fi
    fi
    echo "socket: unix:///run/minicri/minicri.sock"
    ;;
esac
