#!/usr/bin/env bash
# Runs two commands of a long make target one after the other, the second also when the first
# failed, and fails when either failed; at the end it shows what failed in every phase. It is
# beside.sh's counterpart for a machine too slow or too busy to run both at once (make test
# chooses, see e2e/cmd/calibrate).
#
# Usage: in-turn.sh <first command>... -- <second command>...
set -uo pipefail

first=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do first+=("$1"); shift; done
[ "${1:-}" = -- ] && [ ${#first[@]} -gt 0 ] && [ $# -gt 1 ] || {
  echo "usage: in-turn.sh <first command>... -- <second command>..." >&2
  exit 2
}
shift

"${first[@]}"
first_rc=$?
"$@"
second_rc=$?
# shellcheck source=pair-end.sh
. "$(dirname "$0")/pair-end.sh"
pair_end "$first_rc" "$second_rc"
