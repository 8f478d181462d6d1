#!/usr/bin/env bash
# Runs a command in a cgroup limited to one CPU of the machine (cgroup v1 cpuset), which stands
# for a machine half as fast: every process the command starts stays in it, and the real nodes
# make their cgroups under it (realnode.CgroupParentEnv), so their kubelets, containerd and
# containers share that CPU too. The cgroup is removed when the command ends, also when it fails
# or is interrupted; it is the run's own (named after this script's process).
#
# Usage: one-core.sh <command>...   (Linux, root, a cgroup v1 cpuset hierarchy)
set -uo pipefail

[ $# -gt 0 ] || { echo "usage: one-core.sh <command>..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "one-core.sh: needs root, to make a cgroup" >&2; exit 1; }
cpuset=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuset(,|$)/ { print $2; exit }' /proc/mounts)
[ -n "$cpuset" ] || { echo "one-core.sh: no cgroup v1 cpuset hierarchy is mounted" >&2; exit 1; }

name=cinder-csi-one-core-$$
dir=$cpuset/$name
cpus=$(cat "$cpuset/cpuset.effective_cpus" 2>/dev/null || cat "$cpuset/cpuset.cpus")
# The last CPU of the first range or list entry's end: any one CPU the machine has.
cpu=$(echo "$cpus" | tr ',' '\n' | tail -n1 | sed 's/.*-//')
mkdir "$dir" || exit 1
cleanup() {
  # Back to the top cgroup first: a cgroup with a process in it cannot be removed.
  echo $$ >"$cpuset/cgroup.procs" 2>/dev/null
  local root left
  for root in $(awk '$3 == "cgroup" { print $2 }' /proc/mounts); do
    [ -d "$root/$name" ] || continue
    # What the command left running in it (its processes only: the cgroup is the run's own).
    left=$(cat "$root/$name"/cgroup.procs 2>/dev/null)
    [ -z "$left" ] || kill -KILL $left 2>/dev/null
    # Deepest first; the real nodes remove theirs when they stop.
    find "$root/$name" -depth -type d -exec rmdir {} + 2>/dev/null
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cat "$cpuset/cpuset.mems" >"$dir/cpuset.mems" && echo "$cpu" >"$dir/cpuset.cpus" && echo $$ >"$dir/cgroup.procs" || exit 1
echo "==> one-core.sh: running in cgroup $name, limited to CPU $cpu of $cpus ($(nproc) CPUs seen from inside)"
export REALNODE_CGROUP_PARENT=$name
start=$SECONDS
"$@"
rc=$?
echo "==> one-core.sh: the command ended (exit code $rc) after $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s on one CPU"
exit $rc
