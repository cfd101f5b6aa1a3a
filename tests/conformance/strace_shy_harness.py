"""The reference, except that some of its starts under strace fail (the runtime's start
that strace 6.1 now and then loses). argv[1]: a file counting the starts under strace;
argv[2]: which of them fail, by number from 1, comma-separated."""

import os
import sys

counter, lost = sys.argv[1], {int(number) for number in sys.argv[2].split(",")}
with open(f"/proc/{os.getppid()}/comm", encoding="utf-8") as parent:
    under_strace = parent.read().strip() == "strace"
if under_strace:
    with open(counter, "a+", encoding="utf-8") as starts:  # one start at a time: the scenario's own order
        starts.write("x")
        starts.seek(0)
        number = len(starts.read())
    if number in lost:
        sys.exit("lost under strace")
os.execv(sys.executable, [sys.executable, "-m", "retryproof.reference_impl"])
