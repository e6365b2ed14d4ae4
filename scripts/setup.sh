#!/usr/bin/env bash
# Brings a Debian 12 machine to what minicri needs, builds it, then either starts the daemon
# (`setup.sh start`) or runs the whole test suite (`setup.sh test`). Run as root from a checkout.
# Only what is missing is installed, so running it again is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in start|test|install) ;; *) echo "usage: $0 start|test|install" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root (minicri manages namespaces, mounts and containers)" >&2; exit 1; }

# What the daemon runs: the OCI runtime, the container monitor, CNI plugins, namespace and firewall tools,
# and a C toolchain for the built-in pause binary. The tests add a registry and busybox for test images.
runtime_packages=(runc conmon containernetworking-plugins iproute2 iptables util-linux zstd gcc libc6-dev musl-tools ca-certificates)
# busybox (dynamic) rather than busybox-static: the two conflict, and its sh looks applets up in PATH.
test_packages=(docker-registry busybox openssl apache2-utils systemd systemd-container e2fsprogs $(command -v kubectl >/dev/null || echo kubernetes-client))
packages=("${runtime_packages[@]}")
[ "$mode" = test ] && packages+=("${test_packages[@]}")
command -v node >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || { echo "setup.sh: minicri needs Node.js 20 or newer (found $(node --version))" >&2; exit 1; }

# npm ci only when the lock file changed since the last install.
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.minicri-lock 2>/dev/null)" != "$lock_sum" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" > node_modules/.minicri-lock
fi
npm run --silent build
ln -sf "$PWD/dist/server/main.js" /usr/local/bin/minicri

case "$mode" in
  test)
    exec npm test --silent
    ;;
  start)
    if [ -d /run/systemd/system ]; then
      install -m 0644 systemd/minicri.service /etc/systemd/system/minicri.service
      systemctl daemon-reload
      systemctl enable --now minicri
      echo "minicri started by systemd: journalctl -u minicri"
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
