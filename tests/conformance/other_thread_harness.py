"""The reference, except that when a kill-phase strace runs it (its command line names
an ``inject=``) another thread makes two pwrite64 calls, as the writing thread makes
its first two on the journal in the recording, but by another path:

- ``during-the-write``: as each write begins, one on ``background.log``, then an empty
  one on the journal (a background flush that gets to the count first): its second
  pwrite64 is the journal's, in a thread whose earlier call differs;
- ``at-start``: two empty ones on the journal before the harness serves: the same
  targets in the same order, entered before the write was sent.

CRASH-POINTS must list those kills as landed elsewhere, never as the points'. An empty
write changes nothing where it runs."""

import os
import runpy
import sys
import threading

import kit_from_source  # noqa: F401  (the kit's modules, under python -S too)

from retryproof.reference_impl.runtime import Runtime

with open(f"/proc/{os.getppid()}/cmdline", "rb") as parent:
    words = parent.read().decode("utf-8", "replace").split("\0")
killing = os.path.basename(words[0]) == "strace" and any("inject=" in word for word in words)
mode = sys.argv[1]
writes = {
    "during-the-write": (("background.log", b"x"), ("receipts.journal", b"")),
    "at-start": (("receipts.journal", b""),) * 2,
}[mode]


def flush() -> None:
    state = os.environ["RETRYPROOF_STATE_DIR"]
    for name, data in writes:
        fd = os.open(os.path.join(state, name), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)


def in_another_thread() -> None:
    other = threading.Thread(target=flush)
    other.start()
    other.join()


if killing and mode == "at-start":
    in_another_thread()
elif killing:
    write_task = Runtime.write_task

    def flushed_first(self, *args, **kwargs):
        in_another_thread()
        return write_task(self, *args, **kwargs)

    Runtime.write_task = flushed_first
sys.argv[1:] = []
runpy.run_module("retryproof.reference_impl", run_name="__main__")
