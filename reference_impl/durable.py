"""The POSIX recipes that make one file step durable, and nothing else.

A stage of a creation counts as done only when a crash right after it (SIGKILL or a
power cut) cannot undo it, so each recipe ends with an fsync of the directory that
holds the new name. Every recipe takes that directory fsync as a parameter: the runtime
passes its own overridable method, so a deliberately faulty variant can drop it and the
kit's durability trace must notice.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from typing import Any

__all__ = ["create_new", "dump", "fsync_directory", "replace", "write_temp"]

FsyncDirectory = Callable[[str], None]

#: Temp names unique within this process; the pid makes them unique among the processes
#: sharing a state directory (``tempfile`` would do the same at a tenth of the start-up).
_temp_numbers = itertools.count()


def fsync_directory(directory: str) -> None:
    """Make a creation, rename or removal inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dump(value: Any) -> bytes:
    """The on-disk form of every record: sorted keys, UTF-8, one line."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"


def write_temp(directory: str, data: bytes) -> str:
    """Write ``data`` to a fresh O_EXCL temp file in ``directory`` and fsync it.

    Temp names start with a dot, so listings skip them; one a crash leaves behind is
    harmless litter, never a half-written record under a real name.
    """
    while True:
        temp = os.path.join(directory, f".tmp-{os.getpid()}-{next(_temp_numbers)}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:
            continue  # litter of a crashed process that had this pid: pick the next name
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(temp)
        raise
    return temp


def create_new(path: str, data: bytes, fsync_dir: FsyncDirectory = fsync_directory) -> None:
    """Create ``path`` holding ``data``, or raise ``FileExistsError`` and change nothing.

    ``os.link`` of a complete, fsynced temp file is an exclusive create that can never
    expose a torn file: a plain O_EXCL create followed by a write would leave an empty
    file under the real name if the process died between the two, and a task path
    holding an empty file reads as occupied forever.
    """
    directory = os.path.dirname(path)
    temp = write_temp(directory, data)
    try:
        os.link(temp, path)
    finally:
        os.unlink(temp)
    fsync_dir(directory)


def replace(path: str, data: bytes, fsync_dir: FsyncDirectory = fsync_directory) -> None:
    """Atomically replace (or create) ``path``: temp, fsync, ``os.replace``, fsync dir."""
    directory = os.path.dirname(path)
    temp = write_temp(directory, data)
    try:
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
    fsync_dir(directory)
