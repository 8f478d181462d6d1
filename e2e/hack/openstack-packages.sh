#!/usr/bin/env bash
# Installs what e2e/realcloud runs a real OpenStack (Keystone, Placement, Nova, Cinder) from:
# Debian's python3-* library packages of the services, RabbitMQ, uwsgi, sqlite3 and qemu-utils,
# each only when missing; and the api-paste.ini files of Cinder and Nova and Cinder's
# resource_filters.json, which only the cinder-common and nova-common packages carry. Those two
# packages are not installed (their maintainer scripts create system users, /etc/ trees and
# debconf prompts): they are downloaded and unpacked into a temporary directory, and only the
# three files are kept, in
# $BIN/openstack-<version of python3-nova>/, so that a package upgrade gets fresh ones.
#
# The service packages that would start systemd units (cinder-volume, nova-compute, ...) are
# never installed; the one daemon a library package starts, rabbitmq-server's broker (and the
# epmd it brings), is kept from starting by a policy-rc.d for the time of the install: the
# harness runs its own broker per cloud.
#
# Usage: openstack-packages.sh [--check]   (BIN defaults to <repo>/bin; root when anything is missing)
#   --check: install nothing; succeed only when everything is in place (prereqs.sh's "up to date").
set -euo pipefail

hack=$(cd "$(dirname "$0")" && pwd)
: "${BIN:=$(cd "$hack/../.." && pwd)/bin}"

packages=(rabbitmq-server python3-keystone python3-cinder python3-nova python3-placement
  python3-openstackclient python3-cinderclient python3-novaclient uwsgi-core uwsgi-plugin-python3
  sqlite3 qemu-utils)

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]; }

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done

# The directory is named by the version without its epoch ("2:"), which a path need not carry.
paste_dir() {
  local v
  v=$(dpkg-query -W -f='${Version}' python3-nova)
  echo "$BIN/openstack-${v#*:}"
}
if [ "${1:-}" = --check ]; then
  [ ${#missing[@]} -eq 0 ] && [ -f "$(paste_dir)/cinder/api-paste.ini" ] && [ -f "$(paste_dir)/cinder/resource_filters.json" ] &&
    [ -f "$(paste_dir)/nova/api-paste.ini" ]
  exit
fi

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "$1; run e2e/hack/openstack-packages.sh as root" >&2
    exit 1
  fi
}

if [ ${#missing[@]} -gt 0 ]; then
  need_root "missing Debian packages: ${missing[*]}"
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # invoke-rc.d asks policy-rc.d before starting a service; 101 means "not allowed". Only a
  # policy of our own is put in place and removed: one the machine already has stays as it is.
  policy=/usr/sbin/policy-rc.d own_policy=""
  if [ ! -e $policy ]; then
    printf '#!/bin/sh\nexit 101\n' >$policy
    chmod 0755 $policy
    own_policy=yes
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  # prereqs.sh may be installing the real nodes' packages beside the Go builds at the same time
  # (host-packages.sh): apt's lock on its package lists fails at once rather than wait, so the
  # two scripts take turns on a lock of their own.
  exec 9>/run/cinder-csi-operator-apt.lock
  flock 9
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
  if [ -n "$own_policy" ]; then
    rm -f $policy
    trap - EXIT
  fi
  # Where systemd runs, the units stay disabled too, so that no reboot starts a system broker;
  # and where the machine's own policy let the package start its broker, it is stopped again,
  # with the epmd it started (epmd -kill ends only an epmd without registered nodes).
  if [ -d /run/systemd/system ]; then
    systemctl disable --now rabbitmq-server.service epmd.socket epmd.service >/dev/null 2>&1 || true
  elif [ -z "$own_policy" ] && [[ " ${missing[*]} " == *" rabbitmq-server "* ]]; then
    invoke-rc.d --force rabbitmq-server stop >/dev/null 2>&1 || true
    epmd -kill >/dev/null 2>&1 || true
  fi
fi

version=$(dpkg-query -W -f='${Version}' python3-nova)
dir=$(paste_dir)
if [ -f "$dir/cinder/api-paste.ini" ] && [ -f "$dir/cinder/resource_filters.json" ] && [ -f "$dir/nova/api-paste.ini" ]; then
  exit 0
fi
need_root "the api-paste.ini files or Cinder's resource_filters.json are missing from $dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apt-get download drops privileges to _apt, which must be able to write the directory.
chown _apt "$tmp" 2>/dev/null || true
# The same versions as the installed libraries: the paste pipelines name their classes.
(cd "$tmp" && apt-get download -qq -o DPkg::Lock::Timeout=600 \
  "cinder-common=$(dpkg-query -W -f='${Version}' python3-cinder)" "nova-common=$version")
for p in cinder nova; do
  dpkg-deb -x "$tmp"/$p-common_*.deb "$tmp/$p-root"
  install -D -m 0644 "$tmp/$p-root/usr/share/$p-common/api-paste.ini" "$dir/$p/api-paste.ini"
done
# The query filters cinder-api allows a project's users (name, status, metadata, ...): without the
# file it allows none, and a volume list filtered by name, which the driver's CreateVolume sends,
# fails with 400 "Invalid filters".
install -D -m 0644 "$tmp/cinder-root/etc/cinder/resource_filters.json" "$dir/cinder/resource_filters.json"
echo "api-paste.ini of Cinder and Nova $version and Cinder's resource_filters.json in $dir"
