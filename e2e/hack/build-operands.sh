#!/usr/bin/env bash
# Builds the binaries of the operator's operand images (cinder-csi-plugin, the kubernetes-csi
# sidecars, kube-rbac-proxy), the real-node kubelet and kubectl, the pod sandbox's pause binary
# and kube-router (whose network-policy controller enforces NetworkPolicy on real nodes) from the
# Go module proxy (and gcc) into version-keyed directories under the bin dir, only when they are
# missing. No registry, container builder or release download is involved;
# package e2e/images packs the results into image tars.
#
# Usage: build-operands.sh <bin dir> <component>...
#   components: all | pause | kubelet | cinder-csi-plugin | sidecars | kube-rbac-proxy | kube-router
# Versions come from the environment (the Makefile passes them): KUBE_VERSION,
# CINDER_CSI_PLUGIN_VERSION, CSI_PROVISIONER_VERSION, CSI_ATTACHER_VERSION, CSI_RESIZER_VERSION,
# CSI_SNAPSHOTTER_VERSION, KUBE_RBAC_PROXY_VERSION, KUBE_ROUTER_VERSION.
# Output: <bin>/<name>-<version>/<name>; kubelet and kubectl go to <bin>/kube-<KUBE_VERSION>/
# next to kube-apiserver. Set SIDECARS_SEPARATE=1 to build the sidecar modules one by one.
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

# main_module copies module@version out of the read-only module cache into a writable directory
# and prints it: modules with replace directives build correctly only as the main module, where
# their replaces apply (`go install module@version` refuses them).
main_module() {
  local src dst
  src=$(module_dir "$1")
  dst=$(mktemp -d -p "$work")
  cp -R "$src/." "$dst/"
  chmod -R u+w "$dst"
  echo "$dst"
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

# build_main_module <name> <module> <version> <package> <ldflags>: builds a command of a module
# that is built as the main module (so its replace directives apply) into <bin>/<name>-<version>.
build_main_module() {
  local out="$bin/$1-$3/$1"
  [ -x "$out" ] && return 0
  go_build "$(main_module "$2@$3")" "$out" "$4" "$5"
  built=1
}

# The version variables are the ones upstream's Makefiles set.
build_cinder() {
  local v=$CINDER_CSI_PLUGIN_VERSION
  build_main_module cinder-csi-plugin k8s.io/cloud-provider-openstack "$v" ./cmd/cinder-csi-plugin \
    "-X k8s.io/component-base/version.gitVersion=$v -X k8s.io/cloud-provider-openstack/pkg/version.Version=$v"
}

build_kube_rbac_proxy() {
  local v=$KUBE_RBAC_PROXY_VERSION
  build_main_module kube-rbac-proxy github.com/brancz/kube-rbac-proxy "$v" ./cmd/kube-rbac-proxy \
    "-X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version/verflag.programName=kube-rbac-proxy"
}

# kube-router runs on the real nodes as a host process (its network-policy controller only), not
# as an image. Its module has no replace directives, so `go install module@version` builds it
# with the module's own go.sum. The version and build-date variables are the ones upstream's
# Makefile sets.
build_kube_router() {
  local v=$KUBE_ROUTER_VERSION out="$bin/kube-router-$KUBE_ROUTER_VERSION"
  [ -x "$out/kube-router" ] && return 0
  local tmp="$out.tmp" pkg=github.com/cloudnativelabs/kube-router/v2/pkg/version
  rm -rf "$tmp"
  GOBIN="$tmp" go install -trimpath \
    -ldflags="-s -w -X $pkg.Version=$v -X $pkg.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%S%z)" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$v"
  mkdir -p "$out"
  mv "$tmp/kube-router" "$out/kube-router"
  rmdir "$tmp"
  built=1
}

# The sidecars: name, module, version, package; csi-snapshotter and snapshot-controller share a
# module.
sidecar_list() {
  echo "csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 $CSI_PROVISIONER_VERSION cmd/csi-provisioner"
  echo "csi-attacher github.com/kubernetes-csi/external-attacher/v4 $CSI_ATTACHER_VERSION cmd/csi-attacher"
  echo "csi-resizer github.com/kubernetes-csi/external-resizer/v2 $CSI_RESIZER_VERSION cmd/csi-resizer"
  echo "csi-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 $CSI_SNAPSHOTTER_VERSION cmd/csi-snapshotter"
  echo "snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8 $CSI_SNAPSHOTTER_VERSION cmd/snapshot-controller"
}

# The external-snapshotter module replaces its client/v8 module with ./client, which its module
# zip omits: the client module of the same version fills the gap.
snapshotter_client() {
  echo "github.com/kubernetes-csi/external-snapshotter/client/v8@$CSI_SNAPSHOTTER_VERSION"
}

build_sidecars() {
  local missing=0 name mod ver pkg
  while read -r name mod ver pkg; do
    [ -x "$bin/$name-$ver/$name" ] || missing=1
  done < <(sidecar_list)
  [ $missing = 0 ] && return 0
  if [ "${SIDECARS_SEPARATE:-0}" != 1 ] && build_sidecars_together; then
    built=1
    return 0
  fi
  [ "${SIDECARS_SEPARATE:-0}" != 1 ] && echo "building the sidecars in one module failed; building them one by one" >&2
  build_sidecars_separately
  built=1
}

# build_sidecars_together builds every sidecar from ONE throwaway module that requires all the
# sidecar modules, so that their common dependencies (client-go, grpc, csi-lib-utils, ...)
# compile once. Its replace directives are the union of the sidecars' own, each module pinned to
# the highest version that any sidecar replaces it with or requires (the sidecars differ only in
# patch or minor levels of the k8s.io staging modules). The sidecars' own builds pin
# csi-provisioner's k8s.io modules to v0.36.x only for its e2e tests (which import
# k8s.io/kubernetes); the binary does not import k8s.io/kubernetes.
build_sidecars_together() {
  local d="$work/sidecars" name mod ver pkg mods=() gomods=()
  mkdir -p "$d"
  while read -r name mod ver pkg; do
    mods+=("$mod@$ver")
  done < <(sidecar_list)
  mapfile -t mods < <(printf '%s\n' "${mods[@]}" | sort -u)
  for m in "${mods[@]}"; do gomods+=("$(module_dir "$m")/go.mod"); done
  {
    echo "module localbuild"
    echo "go 1.26"
    for m in "${mods[@]}"; do echo "require ${m%@*} ${m#*@}"; done
    echo "require $(snapshotter_client | tr @ ' ')"
    # Same-path replaces ("k8s.io/api => k8s.io/api v0.37.0") of any sidecar name the modules to
    # pin; local ones (./client) are covered by the require above.
    awk '$1 == "replace" || $1 == "require" { $1 = ""; $0 = $0 }
      $2 == "=>" && $1 == $3 && $4 ~ /^v/ { print $1 }' "${gomods[@]}" | sort -u >"$d/pinned"
    # Candidate versions: every replace target and every require of a pinned module; the highest
    # wins.
    awk 'NR == FNR { pin[$1] = 1; next }
      $1 == "replace" || $1 == "require" { $1 = ""; $0 = $0 }
      $2 == "=>" && ($1 in pin) && $4 ~ /^v/ { print $1, $4; next }
      ($1 in pin) && $2 ~ /^v/ { print $1, $2 }' "$d/pinned" "${gomods[@]}" |
      sort -k1,1 -k2,2V | awk '{ v[$1] = $2 } END { for (m in v) print "replace " m " => " m " " v[m] }' | sort
  } >"$d/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    while read -r name mod ver pkg; do echo "	_ \"$mod/$pkg\""; done < <(sidecar_list)
    echo ")"
  } >"$d/tools.go"
  (cd "$d" && go mod tidy) || return 1
  while read -r name mod ver pkg; do
    [ -x "$bin/$name-$ver/$name" ] && continue
    echo "building $name $ver (shared module)"
    go_build "$d" "$bin/$name-$ver/$name" "$mod/$pkg" "-X main.version=$ver" || return 1
  done < <(sidecar_list)
}

# build_sidecars_separately builds each sidecar module as the main module, as upstream does.
build_sidecars_separately() {
  local name mod ver pkg dir
  declare -A dirs=()
  while read -r name mod ver pkg; do
    [ -x "$bin/$name-$ver/$name" ] && continue
    if [ -z "${dirs[$mod@$ver]:-}" ]; then
      dir=$(main_module "$mod@$ver")
      if [ "$mod" = github.com/kubernetes-csi/external-snapshotter/v8 ] && [ ! -f "$dir/client/go.mod" ]; then
        cp -R "$(module_dir "$(snapshotter_client)")/." "$dir/client/"
        chmod -R u+w "$dir/client"
      fi
      dirs[$mod@$ver]=$dir
    fi
    echo "building $name $ver"
    go_build "${dirs[$mod@$ver]}" "$bin/$name-$ver/$name" "./$pkg" "-X main.version=$ver"
  done < <(sidecar_list)
}

for what in "$@"; do
  case "$what" in
  pause) timed pause build_pause ;;
  kubelet) timed "kubelet, kubectl" build_kubelet ;;
  cinder-csi-plugin) timed cinder-csi-plugin build_cinder ;;
  sidecars) timed "csi sidecars" build_sidecars ;;
  kube-rbac-proxy) timed kube-rbac-proxy build_kube_rbac_proxy ;;
  kube-router) timed kube-router build_kube_router ;;
  all)
    timed pause build_pause
    timed "kubelet, kubectl" build_kubelet
    timed "csi sidecars" build_sidecars
    timed kube-rbac-proxy build_kube_rbac_proxy
    timed kube-router build_kube_router
    timed cinder-csi-plugin build_cinder
    ;;
  *)
    echo "unknown component $what (want all, pause, kubelet, cinder-csi-plugin, sidecars, kube-rbac-proxy, kube-router)" >&2
    exit 2
    ;;
  esac
done
