#!/usr/bin/env bash
# Runs one numbered phase of a long make target: a heading with its place in the sequence
# ("==> 3/6 e2e suite"), the command's own output (its standard error merged into its standard
# output), and its time when it ends, also when it fails (then with the command's exit code,
# which this script exits with).
#
# When the phase fails, what failed (failures.sh) follows, so that the end of a long log says it;
# with FAILURES set, it is also appended to that file, for a target of several phases to show
# again at its very end.
#
# Usage: phase.sh "<n>/<total> <what>" <command> [<arg>...]
set -uo pipefail

what=$1
shift
hack=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "==> $what"
start=$SECONDS
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))
if [ $rc = 0 ]; then
  echo "==> $what: done in $((elapsed / 60)) min $((elapsed % 60)) s"
  exit 0
fi
summary=$({
  echo "==> $what: FAILED (exit code $rc) after $((elapsed / 60)) min $((elapsed % 60)) s; what failed:"
  "$hack/failures.sh" "$out"
})
echo "$summary" >&2
if [ -n "${FAILURES:-}" ]; then
  echo "$summary" >>"$FAILURES"
fi
exit $rc
