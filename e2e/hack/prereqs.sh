#!/usr/bin/env bash
# Builds what a make target needs, as numbered steps: each says what it builds and its place in the
# sequence ("[4/11] csi sidecars"), shows the build's own output, and ends with its time or with
# "up to date" when everything it makes is already in ./bin. The Makefile passes the steps its
# target needs (run-local on simulated nodes needs no kubelet or images; on real nodes no kwok) and
# the versions in the environment (the same variables build-upstream.sh and build-operands.sh read).
#
# Usage: prereqs.sh <step>...
#   steps: operator harness control-plane etcd kwok host-packages kubelet pause operands images
#          external-storage-suite openstack prometheus previous-release
# operands is etcd, the csi sidecars, kube-rbac-proxy, kube-router and cinder-csi-plugin, compiled
# together in one module that shares the kube binaries' package versions (build-operands.sh).
# The Debian packages (host-packages, then openstack) install side by side with the Go builds: apt
# waits on the network and the disk, the compiler on the CPU. They install one after the other
# (dpkg takes one lock); the images wait only for the host packages, whose tools they copy, and
# each step's output is shown when it is done.
set -euo pipefail

hack=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$hack/../.." && pwd)
: "${BIN:=$root/bin}" "${KUBE_VERSION:?}" "${ETCD_VERSION:?}" "${KWOK_VERSION:?}"
: "${PREVIOUS_RELEASE:=}" "${REALNODE_HOST_PACKAGES:=}" "${OPERAND_HOST_PACKAGES:=}" "${OPERAND_IMAGE_FLAGS:=}" "${LDFLAGS:=-s -w}" "${PROMETHEUS_VERSION:=v0.316.0}"

# label prints what a step builds, with its version.
label() {
  case "$1" in
  operator) echo "cinder-csi-operator" ;;
  harness) echo "the test harness's commands (run-local, operand-images, ...)" ;;
  control-plane) echo "kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION" ;;
  etcd) echo "etcd $ETCD_VERSION" ;;
  kwok) echo "kwok $KWOK_VERSION (simulated nodes)" ;;
  host-packages) echo "Debian packages of real nodes and images" ;;
  openstack) echo "OpenStack Zed from Debian packages (real cloud)" ;;
  kubelet) echo "kubelet, kubectl $KUBE_VERSION" ;;
  pause) echo "pause $KUBE_VERSION" ;;
  operands) echo "etcd, csi sidecars, cinder-csi-plugin $CINDER_CSI_PLUGIN_VERSION, kube-rbac-proxy, kube-router (one module)" ;;
  images) echo "operand images (OCI tars under bin/images)" ;;
  external-storage-suite) echo "e2e.test, ginkgo, agnhost $KUBE_VERSION (upstream storage suite)" ;;
  prometheus) echo "prometheus, promtool (module $PROMETHEUS_VERSION)" ;;
  previous-release) echo "cinder-csi-operator at the previous release, ${PREVIOUS_RELEASE:0:12} (the upgrade's start)" ;;
  *) return 1 ;;
  esac
}

# present succeeds when everything a step makes is already there; steps that Go's build cache
# makes cheap (the operator, the harness, the images' packing) always run.
present() {
  local f
  case "$1" in
  control-plane) for f in kube-apiserver kube-controller-manager kube-scheduler; do [ -x "$BIN/kube-$KUBE_VERSION/$f" ] || return 1; done ;;
  etcd) [ -x "$BIN/etcd-$ETCD_VERSION/etcd" ] ;;
  kwok) [ -x "$BIN/kwok-$KWOK_VERSION/kwok" ] && [ -f "$BIN/kwok-$KWOK_VERSION/stages.yaml" ] ;;
  kubelet) [ -x "$BIN/kube-$KUBE_VERSION/kubelet" ] && [ -x "$BIN/kube-$KUBE_VERSION/kubectl" ] ;;
  pause) [ -x "$BIN/pause-$KUBE_VERSION/pause" ] ;;
  operands) for f in etcd-$ETCD_VERSION/etcd csi-provisioner-$CSI_PROVISIONER_VERSION/csi-provisioner \
    csi-attacher-$CSI_ATTACHER_VERSION/csi-attacher csi-resizer-$CSI_RESIZER_VERSION/csi-resizer \
    csi-snapshotter-$CSI_SNAPSHOTTER_VERSION/csi-snapshotter snapshot-controller-$CSI_SNAPSHOTTER_VERSION/snapshot-controller \
    kube-rbac-proxy-$KUBE_RBAC_PROXY_VERSION/kube-rbac-proxy kube-router-$KUBE_ROUTER_VERSION/kube-router \
    cinder-csi-plugin-$CINDER_CSI_PLUGIN_VERSION/cinder-csi-plugin; do [ -x "$BIN/$f" ] || return 1; done ;;
  external-storage-suite) for f in e2e.test ginkgo agnhost; do [ -x "$BIN/kube-e2e-$KUBE_VERSION/$f" ] || return 1; done ;;
  openstack) BIN=$BIN "$hack/openstack-packages.sh" --check ;;
  prometheus) [ -x "$BIN/prometheus-$PROMETHEUS_VERSION/prometheus" ] && [ -x "$BIN/prometheus-$PROMETHEUS_VERSION/promtool" ] ;;
  previous-release) [ -x "$BIN/previous-release-$PREVIOUS_RELEASE/cinder-csi-operator" ] && [ -d "$BIN/previous-release-$PREVIOUS_RELEASE/manifests/install" ] ;;
  *) return 1 ;;
  esac
}

# build runs a step's build. The harness's commands build with the operator's flags (no cgo,
# trimmed paths), so the packages both import compile once into Go's build cache.
build() {
  case "$1" in
  operator) CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o "$BIN/cinder-csi-operator" "$root/cmd/cinder-csi-operator" ;;
  harness) CGO_ENABLED=0 go -C "$root/e2e" build -trimpath -o "$BIN/harness/" ./cmd/run-local ./cmd/operand-images ./cmd/external-storage ./cmd/realnode-sweep ./cmd/calibrate ;;
  control-plane) "$hack/build-upstream.sh" kube "$KUBE_VERSION" "$BIN/kube-$KUBE_VERSION" ;;
  etcd) "$hack/build-upstream.sh" etcd "$ETCD_VERSION" "$BIN/etcd-$ETCD_VERSION" ;;
  kwok) "$hack/build-upstream.sh" kwok "$KWOK_VERSION" "$BIN/kwok-$KWOK_VERSION" ;;
  host-packages) "$hack/host-packages.sh" $REALNODE_HOST_PACKAGES $OPERAND_HOST_PACKAGES ;;
  openstack) BIN=$BIN "$hack/openstack-packages.sh" ;;
  kubelet | pause) "$hack/build-operands.sh" "$BIN" "$1" ;;
  operands) "$hack/build-operands.sh" "$BIN" etcd sidecars kube-rbac-proxy kube-router cinder-csi-plugin ;;
  # OPERAND_IMAGE_FLAGS is a list of flags: split on purpose.
  # shellcheck disable=SC2086
  images) "$BIN/harness/operand-images" $OPERAND_IMAGE_FLAGS ;;
  external-storage-suite) "$hack/build-upstream.sh" kube-e2e "$KUBE_VERSION" "$BIN/kube-e2e-$KUBE_VERSION" ;;
  prometheus) "$hack/build-upstream.sh" prometheus "$PROMETHEUS_VERSION" "$BIN/prometheus-$PROMETHEUS_VERSION" ;;
  previous-release) LDFLAGS=$LDFLAGS "$hack/build-previous-release.sh" "$PREVIOUS_RELEASE" "$BIN/previous-release-$PREVIOUS_RELEASE" ;;
  esac
}

steps=("$@")
for s in "${steps[@]}"; do label "$s" >/dev/null || { echo "unknown step $s" >&2; exit 2; }; done
total=${#steps[@]}
begin=$SECONDS

# The Debian packages run in one background job: host-packages, then openstack when it is asked
# for and missing. apt_dir holds each one's output (<step>.log) and, once done, its exit code
# and time in seconds (<step>.rc).
apt_pid="" apt_dir=$(mktemp -d)
trap 'rm -rf "$apt_dir"' EXIT
declare -A apt_head=()

# finish_apt waits until the background packages of step are in and shows their output.
finish_apt() {
  local step=$1 rc took
  [ -n "${apt_head[$step]:-}" ] || return 0
  while [ ! -f "$apt_dir/$step.rc" ]; do
    kill -0 "$apt_pid" 2>/dev/null || [ -f "$apt_dir/$step.rc" ] || { echo "${apt_head[$step]} failed" >&2; exit 1; }
    sleep 1
  done
  read -r rc took <"$apt_dir/$step.rc"
  sed 's/^/    /' "$apt_dir/$step.log"
  if [ "$rc" != 0 ]; then
    echo "${apt_head[$step]} failed" >&2
    exit "$rc"
  fi
  echo "${apt_head[$step]}: done in $took s"
  unset "apt_head[$step]"
}

# background_packages starts the Debian packages' job when host-packages comes before a build.
background_packages() {
  local i=0 s todo=()
  for s in "${steps[@]}"; do
    i=$((i + 1))
    case "$s" in
    host-packages) [ $i -lt "$total" ] && todo+=("$s:$i") ;;
    openstack) [ ${#todo[@]} -gt 0 ] && ! present openstack && todo+=("$s:$i") ;;
    esac
  done
  [ ${#todo[@]} -gt 0 ] || return 0
  for s in "${todo[@]}"; do
    apt_head[${s%%:*}]="[${s##*:}/$total] $(label "${s%%:*}")"
  done
  (
    for s in "${todo[@]}"; do
      s=${s%%:*} rc=0 start=$SECONDS
      build "$s" >"$apt_dir/$s.log" 2>&1 || rc=$?
      echo "$rc $((SECONDS - start))" >"$apt_dir/$s.rc"
      [ $rc = 0 ] || exit $rc
    done
  ) &
  apt_pid=$!
}

background_packages
i=0
for s in "${steps[@]}"; do
  i=$((i + 1))
  head="[$i/$total] $(label "$s")"
  if [ -n "${apt_head[$s]:-}" ]; then
    echo "$head: checking (and installing what is missing) beside the builds"
    continue
  fi
  if present "$s"; then
    echo "$head: up to date"
    continue
  fi
  # The images copy host tools: the packages must be in before they are packed.
  [ "$s" = images ] && finish_apt host-packages
  echo "$head: building"
  start=$SECONDS
  build "$s" 2>&1 | sed -u 's/^/    /'
  echo "$head: done in $((SECONDS - start)) s"
done
finish_apt host-packages
finish_apt openstack
echo "ready in $((SECONDS - begin)) s"
