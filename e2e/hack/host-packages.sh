#!/usr/bin/env bash
# Installs the Debian packages given as arguments when they are missing, and does nothing when
# all are installed (so it is safe to run before every build). The operand images copy host tools
# (xfsprogs' mkfs.xfs, e2fsprogs, util-linux' mount and blkid, ...) with their libraries from this
# machine, so these packages must be present on the build host.
#
# Usage: host-packages.sh <debian package>...
#   e.g. e2e/hack/host-packages.sh xfsprogs e2fsprogs mount util-linux
# Needs root (apt-get) only when a package is missing; `apt-get update` runs at most once.
set -euo pipefail

missing=()
for p in "$@"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]}; install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be absent or stale on a fresh machine: refresh them once, only when an
# install is needed.
# prereqs.sh may install the real cloud's packages at the same time: apt's own locks fail at once
# rather than wait, so the two scripts take turns on a lock of their own.
exec 9>/run/cinder-csi-operator-apt.lock
flock 9
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
