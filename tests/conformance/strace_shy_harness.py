"""The reference, except that its first start under strace fails (the runtime's start
that strace 6.1 now and then loses): argv[1] is a marker file, made by that failed start."""

import os
import sys

marker = sys.argv[1]
with open(f"/proc/{os.getppid()}/comm", encoding="utf-8") as parent:
    under_strace = parent.read().strip() == "strace"
if under_strace and not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit("lost under strace")
os.execv(sys.executable, [sys.executable, "-m", "retryproof.reference_impl"])
