#!/usr/bin/env bash
# Builds the binaries of the operator's operand images (cinder-csi-plugin, the kubernetes-csi
# sidecars, kube-rbac-proxy), the real-node kubelet and kubectl, the pod sandbox's pause binary,
# kube-router (whose network-policy controller enforces NetworkPolicy on real nodes) and the local
# clusters' etcd from the Go module proxy (and gcc) into version-keyed directories under the bin
# dir, only when they are missing. No registry, container builder or release download is involved;
# package e2e/imagetars packs the results into image tars.
#
# Usage: build-operands.sh <bin dir> <component>...
#   components: all | pause | kubelet | etcd | cinder-csi-plugin | sidecars | kube-rbac-proxy |
#   kube-router ("all" is every one but etcd)
# Versions come from the environment (the Makefile passes them): KUBE_VERSION, ETCD_VERSION,
# CINDER_CSI_PLUGIN_VERSION, CSI_PROVISIONER_VERSION, CSI_ATTACHER_VERSION, CSI_RESIZER_VERSION,
# CSI_SNAPSHOTTER_VERSION, KUBE_RBAC_PROXY_VERSION, KUBE_ROUTER_VERSION.
# Output: <bin>/<name>-<version>/<name>; kubelet and kubectl go to <bin>/kube-<KUBE_VERSION>/
# next to kube-apiserver.
set -euo pipefail

bin=$1
shift
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
hack=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# k8s.io modules are not all in the checksum database; their hashes are recorded in the throwaway
# modules' go.sum instead.
export GONOSUMDB="k8s.io,go.etcd.io"
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

# go_build <dir> <output> <package> <ldflags>: a static, stripped, path-trimmed build.
go_build() {
  local tmp="$2.tmp"
  mkdir -p "$(dirname "$2")"
  (cd "$1" && go build -trimpath -ldflags="-s -w $4" -o "$tmp" "$3")
  mv "$tmp" "$2"
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

# kubelet and kubectl come from the same throwaway module as kube-apiserver (build-upstream.sh),
# so that the packages they share are compiled once.
build_kubelet() {
  local out="$bin/kube-$KUBE_VERSION"
  [ -x "$out/kubelet" ] && [ -x "$out/kubectl" ] && return 0
  "$hack/build-upstream.sh" kube-node "$KUBE_VERSION" "$out"
  built=1
}

# The operands (etcd, cinder-csi-plugin, the sidecars, kube-rbac-proxy, kube-router) build in ONE
# throwaway module, so that what they share (client-go, apimachinery, grpc, otel, prometheus,
# golang.org/x, ...) compiles once for all of them instead of once per upstream module's own
# graph. Every module they share with the kube binaries is pinned, with a replace directive, to
# the version the kube build (build-upstream.sh) selects: the Kubernetes release the local
# clusters run is the one set of libraries every operand compiles against (left to minimal
# version selection, the sidecars would raise the Kubernetes libraries to a minor release that
# kube-rbac-proxy does not compile against, and the etcd client and raft past what the etcd server
# compiles with). Two exceptions: etcd's modules follow the etcd server built, and the CSI spec
# floats to what the sidecars need. The pins do not make the kube build's compiled packages
# reusable here (Go's build cache keys a package by its module's selected version, not by the
# code a replace puts there): the sharing is among the operands. The module requires every
# operand, whichever are asked for, so that its build list, and so the build cache's keys, do not
# depend on the selection.

# operand_list: name, module, version, package, ldflags. The version variables are the ones the
# upstream Makefiles set; csi-snapshotter and snapshot-controller share a module.
operand_list() {
  local sn=github.com/kubernetes-csi/external-snapshotter/v8 cb=k8s.io/component-base/version
  local kr=github.com/cloudnativelabs/kube-router/v2/pkg/version
  echo "etcd go.etcd.io/etcd/server/v3 $ETCD_VERSION go.etcd.io/etcd/server/v3 -"
  echo "csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 $CSI_PROVISIONER_VERSION cmd/csi-provisioner -X main.version=$CSI_PROVISIONER_VERSION"
  echo "csi-attacher github.com/kubernetes-csi/external-attacher/v4 $CSI_ATTACHER_VERSION cmd/csi-attacher -X main.version=$CSI_ATTACHER_VERSION"
  echo "csi-resizer github.com/kubernetes-csi/external-resizer/v2 $CSI_RESIZER_VERSION cmd/csi-resizer -X main.version=$CSI_RESIZER_VERSION"
  echo "csi-snapshotter $sn $CSI_SNAPSHOTTER_VERSION cmd/csi-snapshotter -X main.version=$CSI_SNAPSHOTTER_VERSION"
  echo "snapshot-controller $sn $CSI_SNAPSHOTTER_VERSION cmd/snapshot-controller -X main.version=$CSI_SNAPSHOTTER_VERSION"
  echo "cinder-csi-plugin k8s.io/cloud-provider-openstack $CINDER_CSI_PLUGIN_VERSION cmd/cinder-csi-plugin" \
    "-X $cb.gitVersion=$CINDER_CSI_PLUGIN_VERSION -X k8s.io/cloud-provider-openstack/pkg/version.Version=$CINDER_CSI_PLUGIN_VERSION"
  echo "kube-rbac-proxy github.com/brancz/kube-rbac-proxy $KUBE_RBAC_PROXY_VERSION cmd/kube-rbac-proxy" \
    "-X $cb.gitVersion=$KUBE_RBAC_PROXY_VERSION -X $cb/verflag.programName=kube-rbac-proxy"
  echo "kube-router github.com/cloudnativelabs/kube-router/v2 $KUBE_ROUTER_VERSION cmd/kube-router" \
    "-X $kr.Version=$KUBE_ROUTER_VERSION -X $kr.BuildDate=$(date -u +%Y-%m-%d)"
}

# out_path prints where a binary goes: <bin>/<name>-<version>/<name>.
out_path() { echo "$bin/$1-$2/$1"; }

# operand_module writes the shared module into $work/operands and tidies it.
operand_module() {
  local d="$work/operands" name mod ver pkg ldf
  [ -f "$d/go.sum" ] && return 0
  mkdir -p "$d"
  {
    echo "module localbuild"
    echo "go 1.26"
    while read -r name mod ver pkg ldf; do echo "require $mod $ver"; done < <(operand_list) | sort -u
    # The snapshotter module replaces its client with ./client, which its module zip omits: the
    # published client module of the same version stands in.
    echo "require github.com/kubernetes-csi/external-snapshotter/client/v8 $CSI_SNAPSHOTTER_VERSION"
    # kube-rbac-proxy's own replace, which only applies when it is the main module.
    echo "replace gopkg.in/square/go-jose.v2 => github.com/go-jose/go-jose v2.6.3+incompatible"
    for m in api/v3 client/pkg/v3 client/v3 pkg/v3 server/v3; do
      echo "replace go.etcd.io/etcd/$m => go.etcd.io/etcd/$m $ETCD_VERSION"
    done
    "$hack/build-upstream.sh" kube-versions "$KUBE_VERSION" |
      awk '$1 !~ /^go\.etcd\.io\/etcd\// && $1 != "github.com/container-storage-interface/spec" &&
        $1 != "k8s.io/kubernetes" { print "replace " $1 " => " $1 " " $2 }'
  } >"$d/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    while read -r name mod ver pkg ldf; do
      [ "$pkg" = "$mod" ] && echo "	_ \"$mod\"" || echo "	_ \"$mod/$pkg\""
    done < <(operand_list)
    echo ")"
  } >"$d/tools.go"
  (cd "$d" && go mod tidy)
}

# build_operands <name>...: builds the named operands that are missing. Their packages compile in
# one go build (both cores busy, one package graph), then each binary links with its own version
# flags, the links side by side.
build_operands() {
  local want=" $* " name mod ver pkg ldf target pkgs=() links=() pids=() i rc=0
  while read -r name mod ver pkg ldf; do
    [[ $want == *" $name "* ]] || continue
    [ -x "$(out_path "$name" "$ver")" ] && continue
    target=$mod/$pkg
    [ "$pkg" = "$mod" ] && target=$mod
    [ "$ldf" = - ] && ldf=
    pkgs+=("$target")
    links+=("$name|$ver|$target|$ldf")
  done < <(operand_list)
  [ ${#pkgs[@]} = 0 ] && return 0
  operand_module
  if [ ${#pkgs[@]} -gt 1 ]; then
    echo "compiling ${#pkgs[@]} operands in one module"
    (cd "$work/operands" && go build -trimpath "${pkgs[@]}")
  fi
  for i in "${links[@]}"; do
    IFS='|' read -r name ver target ldf <<<"$i"
    echo "linking $name $ver"
    go_build "$work/operands" "$(out_path "$name" "$ver")" "$target" "$ldf" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  [ $rc = 0 ] || return 1
  built=1
}

names=()
for what in "$@"; do
  case "$what" in
  pause) timed pause build_pause ;;
  kubelet) timed "kubelet, kubectl" build_kubelet ;;
  etcd | cinder-csi-plugin | kube-rbac-proxy | kube-router) names+=("$what") ;;
  sidecars) names+=(csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller) ;;
  all)
    timed pause build_pause
    timed "kubelet, kubectl" build_kubelet
    names+=(csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller cinder-csi-plugin kube-rbac-proxy kube-router)
    ;;
  *)
    echo "unknown component $what (want all, pause, kubelet, etcd, cinder-csi-plugin, sidecars, kube-rbac-proxy, kube-router)" >&2
    exit 2
    ;;
  esac
done
[ ${#names[@]} = 0 ] || timed "${names[*]}" build_operands "${names[@]}"
