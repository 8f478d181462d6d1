#!/usr/bin/env bash
# Builds the operator at an earlier commit of this repository, the release the upgrade scenario
# starts from: its binary and its own install manifests, into <out> (bin/previous-release-<commit>).
# The source comes from the clone's own history (git archive), never from elsewhere; a shallow
# clone that lacks the commit is told how to get it. The build shares Go's caches with this tree's.
#
# Usage: build-previous-release.sh <commit> <out>
set -euo pipefail

[ $# = 2 ] || { echo "usage: build-previous-release.sh <commit> <out>" >&2; exit 2; }
commit=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
: "${LDFLAGS:=-s -w}"

if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "commit $commit, the previous release, is not in this clone's history (a shallow clone?): run git fetch --unshallow" >&2
  exit 1
fi
work=$(mktemp -d "$(dirname "$out")/.previous-release-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/src" "$work/out"
git -C "$root" archive "$commit" | tar -x -C "$work/src"
CGO_ENABLED=0 go -C "$work/src" build -trimpath -ldflags "$LDFLAGS" -o "$work/out/cinder-csi-operator" ./cmd/cinder-csi-operator
mkdir -p "$work/out/manifests"
cp -r "$work/src/manifests/install" "$work/out/manifests/"
echo "$commit" >"$work/out/commit"
rm -rf "$out"
mv "$work/out" "$out"
