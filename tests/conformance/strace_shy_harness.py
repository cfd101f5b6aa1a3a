"""The reference, except that some of its starts under strace fail (the runtime's start
that strace 6.1 now and then loses). argv[1]: a file counting the starts it lost;
argv[2]: a regular expression for the strace command lines whose starts it loses (the
recording's has ``-ttt``; a point's names its ``inject=``); argv[3]: how many such starts
it loses, the first ones; argv[4:]: the reference's command, which every other start
becomes. Chosen by command line, not by order: CRASH-POINTS runs points two at a time,
so the order of their starts varies from run to run. Started with ``python -S`` and
becoming the kit's ``python -S launch.py``: with ``site`` each start under strace paid
two interpreters' site imports (a test makes about 20)."""

import fcntl
import os
import re
import sys

counter, chosen, lose = sys.argv[1], re.compile(sys.argv[2]), int(sys.argv[3])
with open(f"/proc/{os.getppid()}/cmdline", "rb") as parent:
    words = parent.read().decode("utf-8", "replace").split("\0")
options = words[: words.index("--")] if "--" in words else words  # strace's own, not this command's
if os.path.basename(words[0]) == "strace" and chosen.search(" ".join(options) + " "):
    with open(counter, "a+", encoding="utf-8") as lost:
        fcntl.flock(lost, fcntl.LOCK_EX)  # two points' starts may count at once
        lost.seek(0)
        if len(lost.read()) < lose:
            lost.write("x")
            lost.flush()
            sys.exit("lost under strace")
os.execv(sys.argv[4], sys.argv[4:])
