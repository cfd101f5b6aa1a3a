from __future__ import annotations

from retryproof.reference_impl.runtime import Runtime


class NoDirectoryFsync(Runtime):
    """Never fsyncs a directory after creating or renaming a file in it.

    Files are fsynced, so every kill test passes: the page cache outlives a SIGKILL.
    A power cut can still lose the new names, and with them a receipt or a task. Only
    a system-call trace sees it.
    """

    killed_by = ("DURABILITY-TRACE",)

    def _fsync_directory(self, directory: str) -> None:
        pass
