"""The files a test session makes outside its tests (tests/conftest.py): a bytecode prefix
in memory and a lock file. Each name carries the session's process id, so that the next
session can remove what a session killed with SIGKILL left behind: no cleanup of its own
ran, and a bytecode prefix in ``/dev/shm`` holds 20 MB or more of memory until the machine
restarts (a CI runner whose job timed out, again on every such job).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile


def session_path(stem: str, parent: str | None, *, folder: bool) -> str:
    """A new folder (``folder``) or file under ``parent`` (the system's temporary folder
    when None), named ``<stem><pid>-<random>``; a file is returned closed."""
    prefix = f"{stem}{os.getpid()}-"
    if folder:
        return tempfile.mkdtemp(prefix=prefix, dir=parent)
    descriptor, path = tempfile.mkstemp(prefix=prefix, dir=parent)
    os.close(descriptor)
    return path


def sweep_orphans(stem: str, parent: str | None) -> list[str]:
    """Remove what ``session_path`` made under ``parent`` for a session whose process no
    longer exists, and return the names removed. A name without a process id (an older
    session's) and one whose process lives, or is another user's, are left alone: a live
    session is still using its files."""
    parent = parent or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            pid, _, rest = name.removeprefix(stem).partition("-")
            if name.startswith(stem) and rest and pid.isdigit() and not _alive(int(pid)):
                path = os.path.join(parent, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
