#!/usr/bin/env bash
# Runs one numbered phase of a long make target: a heading with its place in the sequence
# ("==> 3/6 e2e suite"), the command's own output unchanged, and its time when it ends, also
# when it fails (then with the command's exit code, which this script exits with).
#
# Usage: phase.sh "<n>/<total> <what>" <command> [<arg>...]
set -uo pipefail

what=$1
shift
echo "==> $what"
start=$SECONDS
"$@"
rc=$?
elapsed=$((SECONDS - start))
if [ $rc = 0 ]; then
  echo "==> $what: done in $((elapsed / 60)) min $((elapsed % 60)) s"
else
  echo "==> $what: FAILED (exit code $rc) after $((elapsed / 60)) min $((elapsed % 60)) s" >&2
fi
exit $rc
