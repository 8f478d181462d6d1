# Sourced by beside.sh and in-turn.sh, which each run two commands of a long make target: shows
# what failed in every phase (FAILURES, see phase.sh) and exits with the first command's exit
# code when it failed, else the second's.
#
# Usage: pair_end <first exit code> <second exit code>
pair_end() {
  if [ -s "${FAILURES:-}" ]; then
    echo "==> what failed, from every phase (also in $FAILURES):" >&2
    cat "$FAILURES" >&2
  fi
  if [ "$1" != 0 ]; then
    exit "$1"
  fi
  exit "$2"
}
