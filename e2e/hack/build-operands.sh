#!/usr/bin/env bash
# Builds the binaries of the operator's operand images (cinder-csi-plugin, the kubernetes-csi
# sidecars, kube-rbac-proxy), the real-node kubelet and the pod sandbox's pause binary from the Go
# module proxy (and gcc) into version-keyed directories under the bin dir, only when they are
# missing. No registry, container builder or release download is involved; `e2e/images` packs
# the results into image tars.
#
# Usage: build-operands.sh <bin dir> all|pause|...
# Versions come from the environment (the Makefile exports them): KUBE_VERSION.
set -euo pipefail

bin=$1
shift
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# k8s.io modules are not all in the checksum database; their hashes are recorded in the throwaway
# modules' go.sum instead.
export GONOSUMDB="k8s.io"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

# module_dir prints the module cache directory of module@version, downloading it when needed.
module_dir() {
  local d
  d=$(mktemp -d -p "$work")
  (cd "$d" && printf 'module localbuild\ngo 1.26\n' >go.mod && go mod download -json "$1" |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
}

# timed runs a build step and reports how long it took, so cold and warm builds can be compared;
# steps set built=1 when they had something to do.
timed() {
  local name=$1 start=$SECONDS
  shift
  built=0
  "$@"
  if [ "$built" = 1 ]; then
    echo "built $name in $((SECONDS - start)) s"
  else
    echo "$name: up to date"
  fi
}

# pause: the pod sandbox's process, a static C program from the kubernetes source tree; its
# directory is keyed by the kubernetes version the source comes from.
build_pause() {
  local out="$bin/pause-$KUBE_VERSION"
  [ -x "$out/pause" ] && return 0
  local src tag
  src=$(module_dir "k8s.io/kubernetes@$KUBE_VERSION")/build/pause
  tag=$(sed -n 's/^TAG ?= *//p' "$src/Makefile")
  mkdir -p "$out"
  gcc -Os -Wall -Werror -static -DVERSION="v$tag-kubernetes-$KUBE_VERSION" -o "$out/pause.tmp" "$src/linux/pause.c"
  mv "$out/pause.tmp" "$out/pause"
  built=1
}

for what in "$@"; do
  case "$what" in
  pause) timed pause build_pause ;;
  all) "$0" "$bin" pause ;;
  *)
    echo "unknown component $what" >&2
    exit 2
    ;;
  esac
done
