"""The reference, except that when a kill-phase strace runs it (its command line names
an ``inject=``), each write first lets another thread make two pwrite64 calls: one on
``background.log``, then an empty one on the journal. That thread's second pwrite64 is
the journal's, as the writing thread's second is in the recording, but reached by
another path (a background flush that gets to the count first): CRASH-POINTS must list
that kill as landed elsewhere, never as the point's. The empty write changes nothing
where it runs."""

import os
import runpy
import threading

from retryproof.reference_impl.runtime import Runtime

with open(f"/proc/{os.getppid()}/cmdline", "rb") as parent:
    words = parent.read().decode("utf-8", "replace").split("\0")
killing = os.path.basename(words[0]) == "strace" and any("inject=" in word for word in words)


def flush() -> None:
    state = os.environ["RETRYPROOF_STATE_DIR"]
    for name, data in (("background.log", b"x"), ("receipts.journal", b"")):
        fd = os.open(os.path.join(state, name), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)


if killing:
    write_task = Runtime.write_task

    def flushed_first(self, *args, **kwargs):
        other = threading.Thread(target=flush)
        other.start()
        other.join()
        return write_task(self, *args, **kwargs)

    Runtime.write_task = flushed_first
runpy.run_module("retryproof.reference_impl", run_name="__main__")
