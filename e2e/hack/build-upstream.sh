#!/usr/bin/env bash
# Builds the upstream binaries the local clusters run (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kwok; kubelet and kubectl for real nodes) from the Go module proxy into a
# version-keyed directory, and only when they are missing. No container image or release
# download is needed.
#
# Usage: build-upstream.sh kube|kube-node|kube-e2e|etcd|kwok|prometheus <version> <output dir>
#        build-upstream.sh kube-versions <version>
# kube-versions prints "module version" for every module of the kube binaries' build list, the
# versions build-operands.sh pins its shared module to. etcd is built by build-operands.sh (it
# shares that module); its build needs KUBE_VERSION in the environment.
set -euo pipefail

what=$1 version=$2 out=${3:-}
if [ "$what" != kube-versions ]; then
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Some upstream modules are not in the checksum database; their hashes are recorded in the
# throwaway module's go.sum instead.
export GONOSUMDB="k8s.io,go.etcd.io,sigs.k8s.io/kwok"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

# kube_module writes the kube binaries' throwaway module into $work. kube (the control plane),
# kube-node (kubelet, kubectl), kube-e2e (below) and kube-versions use one and the same module, so
# that the packages they share compile once into the Go build cache.
kube_module() {
  local staging staging_version
  staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
    cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice
    externaljwt kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl
    kubelet metrics mount-utils pod-security-admission sample-apiserver sample-cli-plugin
    sample-controller streaming"
  # k8s.io/kubernetes pins its staging repositories to v0.0.0 with local replace directives, so
  # every one of them is replaced by the published module of the matching minor release.
  staging_version="v0.${version#v1.}"
  {
    echo "module localbuild"
    echo "go 1.26"
    echo "require k8s.io/kubernetes $version"
    for s in $staging; do echo "replace k8s.io/$s => k8s.io/$s $staging_version"; done
  } >"$work/go.mod"
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
}

# tidy_kube_module resolves the module's requirements. The first tidy downloads the module graph
# and may stop at a test-only module it cannot resolve yet (-e carries on); the second must then
# succeed.
tidy_kube_module() {
  (cd "$work" && { go mod tidy -e || true; } && go mod tidy)
}

case "$what" in
kube-versions)
  kube_module
  tidy_kube_module >&2
  (cd "$work" && go list -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' all) |
    awk 'NF == 2'
  ;;
kube | kube-node | kube-e2e)
  names="kube-apiserver kube-controller-manager kube-scheduler"
  [ "$what" = kube-node ] && names="kubelet kubectl"
  [ "$what" = kube-e2e ] && names="e2e.test ginkgo agnhost"
  done=1
  for n in $names; do [ -x "$out/$n" ] || done=0; done
  [ $done = 1 ] && exit 0
  kube_module
  if [ "$what" = kube-e2e ]; then
    # e2e.test is the test binary of k8s.io/kubernetes/test/e2e; its test file imports the suites,
    # among them test/e2e/storage/external, which registers -storage.testdriver. Importing them
    # here keeps their requirements in the throwaway module's go.mod.
    cat >"$work/e2e_tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/storage"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
GO
  fi
  tidy_kube_module
  # Without these the binaries report v0.0.0-master (the kubelet puts it in the Node status).
  minor=${version#v1.}
  minor=${minor%%.*}
  vpkg=k8s.io/component-base/version
  vflags="-X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
  if [ "$what" = kube-e2e ]; then
    echo "building e2e.test $version"
    (cd "$work" && go test -c -trimpath -ldflags="-s -w $vflags" -o "$out/e2e.test.tmp" k8s.io/kubernetes/test/e2e)
    mv "$out/e2e.test.tmp" "$out/e2e.test"
    # ginkgo at the version k8s.io/kubernetes requires (the throwaway module's build list).
    echo "building ginkgo $(cd "$work" && go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)"
    (cd "$work" && go build -trimpath -ldflags="-s -w" -o "$out/ginkgo" github.com/onsi/ginkgo/v2/ginkgo)
    # agnhost reports the version its image is tagged with (the release's test/images/agnhost/VERSION),
    # by which the suite's reference to it is told from those of older agnhost images.
    agnhost_version=$(cat "$(cd "$work" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/VERSION")
    echo "building agnhost $agnhost_version"
    (cd "$work" && go build -trimpath -ldflags="-s -w -X main.Version=$agnhost_version" -o "$out/agnhost" k8s.io/kubernetes/test/images/agnhost)
    exit 0
  fi
  # One go build for all of them: while one binary links, the others' packages compile.
  pkgs=()
  for n in $names; do pkgs+=("k8s.io/kubernetes/cmd/$n"); done
  echo "building $names $version"
  (cd "$work" && go build -trimpath -ldflags="-s -w $vflags" -o "$out/" "${pkgs[@]}")
  ;;
etcd)
  [ -x "$out/etcd" ] && exit 0
  ETCD_VERSION=$version exec "$(dirname "$0")/build-operands.sh" "$(dirname "$out")" etcd
  ;;
kwok)
  [ -x "$out/kwok" ] && [ -f "$out/stages.yaml" ] && exit 0
  echo "building kwok $version"
  GOBIN="$out" go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@$version"
  # kwok refuses to start without stage definitions; the module ships the "fast" ones, which make
  # nodes Ready and pods Running/Ready at once.
  dir=$(cd "$work" && printf 'module localbuild\ngo 1.26\n' >go.mod && go mod download -json "sigs.k8s.io/kwok@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  : >"$out/stages.yaml.tmp"
  for f in "$dir"/kustomize/stage/node/fast/*.yaml "$dir"/kustomize/stage/node/heartbeat/*.yaml "$dir"/kustomize/stage/pod/fast/*.yaml; do
    case "$f" in */kustomization.yaml) continue ;; esac
    { echo "---"; cat "$f"; } >>"$out/stages.yaml.tmp"
  done
  mv "$out/stages.yaml.tmp" "$out/stages.yaml"
  ;;
prometheus)
  # The module's version v0.X.Y is Prometheus 3.X.Y. Service discovery is cut down to the
  # Kubernetes API's (the test world's Prometheus finds its targets as OpenShift's does, from
  # endpoints), and the web UI's assets are not built in (they need npm): the HTTP API serves all
  # the tests and run-local read.
  [ -x "$out/prometheus" ] && [ -x "$out/promtool" ] && exit 0
  minor=${version#v0.}
  release=3.$((${minor%%.*} - 300)).${minor#*.}
  echo "building prometheus and promtool $release"
  vpkg=github.com/prometheus/common/version
  GOBIN="$out" go install -trimpath -tags remove_all_sd,enable_kubernetes_sd \
    -ldflags="-s -w -X $vpkg.Version=$release -X $vpkg.Branch=release -X $vpkg.Revision=$version" \
    "github.com/prometheus/prometheus/cmd/prometheus@$version" "github.com/prometheus/prometheus/cmd/promtool@$version"
  ;;
*)
  echo "unknown component $what" >&2
  exit 2
  ;;
esac
