#!/usr/bin/env bash
# Runs phases of a long make target beside the phases that follow them: the background command's
# output goes to a log file and is shown whole once the foreground command has ended (so the two
# never interleave), and the script fails when either failed. It is for phases that mostly wait
# (the integration tests' idle windows, outages and rollouts) next to phases that also mostly wait
# (real nodes starting pods and attaching volumes), on a machine with few cores. Each side runs
# its own numbered phases (phase.sh), which say what failed.
#
# Interrupted or killed, it stops the background phase's whole process group with it.
#
# BESIDE_AFTER, seconds, delays the background command: it starts once the foreground's heaviest
# part (the storage worlds' start-ups) is behind.
#
# Usage: beside.sh <log> <phase name> <background command>... -- <foreground command>...
set -uo pipefail

log=$1 name=$2
shift 2
bg=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do bg+=("$1"); shift; done
[ "${1:-}" = -- ] && [ ${#bg[@]} -gt 0 ] && [ $# -gt 1 ] || {
  echo "usage: beside.sh <log> <phase name> <background command>... -- <foreground command>..." >&2
  exit 2
}
shift
mkdir -p "$(dirname "$log")"

after=${BESIDE_AFTER:-0}
if [ "$after" -gt 0 ]; then
  echo "==> $name: starts beside what follows once it is $after s in; its output is in $log and is shown when they end"
else
  echo "==> $name: started beside what follows; its output is in $log and is shown when they end"
fi
# A process group of its own, so that an interrupt stops every test process it started.
set -m
{
  sleep "$after"
  start=$SECONDS
  "${bg[@]}"
  rc=$?
  echo "==> $name: ended (exit code $rc) after $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
  exit $rc
} >"$log" 2>&1 &
bg_pid=$!
set +m
stop_bg() { kill -TERM -- "-$bg_pid" 2>/dev/null; wait "$bg_pid" 2>/dev/null; }
trap 'stop_bg; exit 130' INT TERM
trap 'kill -0 "$bg_pid" 2>/dev/null && stop_bg' EXIT

"$@"
fg_rc=$?

if kill -0 "$bg_pid" 2>/dev/null; then
  echo "==> waiting for $name"
fi
wait "$bg_pid"
bg_rc=$?
echo "==> output of $name (from $log):"
cat "$log"
# shellcheck source=pair-end.sh
. "$(dirname "$0")/pair-end.sh"
pair_end "$fg_rc" "$bg_rc"
