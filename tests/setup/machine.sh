#!/usr/bin/env bash
# What the test suite needs on the machine besides the project's own files: PostgreSQL and Redis
# running, Debian's Chromium (browser tests), kubectl (the sandbox cluster's client), Prometheus (the
# Prometheus metrics source is tested against a real one) and iproute2 (the isolated pod network).
# `make test` and `.ci/run` start this first. What is missing is started or installed; where that needs
# root, or a command is not there to do it, it stops at once with the one command to run.
set -euo pipefail

say() { echo "tandem: test set-up: $*"; }
stop() { echo "tandem: test set-up: $1" >&2; echo "  run: $2" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else return 1; fi
}

apt_install() {  # package...
  local missing="$*"
  say "installing $missing (Debian packages)"
  as_root apt-get update -qq && as_root apt-get install -y -qq "$@" >/dev/null \
    || stop "could not install $missing" "sudo apt-get install -y $missing"
}

if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  command -v pg_ctlcluster >/dev/null 2>&1 \
    || stop "PostgreSQL is not installed" "sudo apt-get install -y postgresql && sudo pg_ctlcluster 15 main start"
  say "PostgreSQL is down; starting it"
  as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start \
    || stop "PostgreSQL would not start" "sudo pg_ctlcluster $(ls /etc/postgresql) main start"
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  command -v redis-server >/dev/null 2>&1 || stop "Redis is not installed" "sudo apt-get install -y redis-server"
  say "Redis is down; starting it"
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log \
    || stop "Redis would not start" "redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save ''"
  for _ in $(seq 1 30); do redis-cli ping >/dev/null 2>&1 && break; sleep 1; done
fi

packages=()
[ -x /usr/bin/chromium ] || packages+=(chromium)
command -v kubectl >/dev/null 2>&1 || packages+=(kubectl)
command -v prometheus >/dev/null 2>&1 || packages+=(prometheus)
command -v ip >/dev/null 2>&1 || packages+=(iproute2)
if [ "${#packages[@]}" -gt 0 ]; then
  apt_install "${packages[@]}"
fi
