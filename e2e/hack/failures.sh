#!/usr/bin/env bash
# Prints what failed in a go test output, short enough to stand at the end of a long log: the
# first data race report, each failed assertion (a Gomega failure: "<file>_test.go:<n>:" ending
# its line, then its indented message), panics (the first with the stack of its goroutine), the
# --- FAIL lines, what a test logged to say why it failed (a line "<file>_test.go:<n>: WHY: ..."
# and the indented lines under it), what the machine was doing then (a "MACHINE: ..." block), and
# for each failed test the last lines it logged from a test file (where a t.Fatalf with a message
# of its own is).
#
# Usage: failures.sh <go test output file>
set -uo pipefail

awk '
  function remember(name, line) {
    n = ++count[name]
    last[name, n % keep] = line
  }
  BEGIN { keep = 4 }
  # Lines of a block that is being copied: the first data race report, an assertion message.
  race == 1 {
    print
    if (/^==================$/ || ++raceLines >= 80) { race = 2 }
    next
  }
  # The first panic: its message, then the goroutine that panicked, up to the blank line that
  # ends its stack, where the code that panicked is named.
  panicking == 1 {
    print
    if ($0 == "" && sawGoroutine || ++panicLines >= 40) { panicking = 2 }
    if (/^goroutine [0-9]+ /) { sawGoroutine = 1 }
    next
  }
  msg > 0 {
    match($0, /^ */)
    if (RLENGTH > indent && msgLines < 25) { print; msgLines++; next }
    msg = 0
  }
  why > 0 {
    match($0, /^ */)
    if (RLENGTH > whyIndent && whyLines < 45) { print; whyLines++; next }
    why = 0
  }
  /_test\.go:[0-9]+: WHY: / { print; match($0, /^ */); whyIndent = RLENGTH; why = 1; whyLines = 0; next }
  # What the machine was doing when a test failed (package e2e/machine): its load over the last
  # minutes and how long the parts of its worlds took to start.
  /\.go:[0-9]+: MACHINE: / { print; match($0, /^ */); whyIndent = RLENGTH; why = 1; whyLines = 0; next }
  /^=== (RUN|NAME|CONT) / { cur = $3; next }
  /^WARNING: DATA RACE$/ && race == 0 { race = 1; raceLines = 0; print "=================="; print; next }
  /_test\.go:[0-9]+: *$/ {
    print; match($0, /^ */); indent = RLENGTH; msg = 1; msgLines = 0; next
  }
  /^ +[^ ]+_test\.go:[0-9]+: ./ && cur != "" { remember(cur, $0) }
  /^panic: / && panicking == 0 { panicking = 1; panicLines = 0; print; next }
  /testing\.go:[0-9]+: race detected/ || /^panic: / { print }
  /^ *--- FAIL: / {
    print
    failed[++nfailed] = $3
  }
  END {
    for (i = 1; i <= nfailed; i++) {
      name = failed[i]
      if (!(name in count)) { continue }
      print "==> the last lines " name " logged:"
      first = count[name] > keep ? count[name] - keep + 1 : 1
      for (j = first; j <= count[name]; j++) { print last[name, j % keep] }
    }
  }
' "$1"
