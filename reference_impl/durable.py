"""The POSIX recipes that make one file step durable, and nothing else.

A stage of a creation counts as done only when a crash right after it (SIGKILL or a
power cut) cannot undo it, so each recipe that makes a name ends with an fsync of the
directory that holds it. Every such recipe takes that directory fsync as a parameter: the
runtime passes its own overridable method, so a deliberately faulty variant can drop it
and the kit's durability trace must notice.

A *document* (a task, a report) appears whole under its name or not at all: it is
written and synced under another name first, then linked or renamed into place. The
receipt states are lines of one append-only file instead (``journal.py``).
"""

from __future__ import annotations

import _thread
import itertools
import json
import os
from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "create_new",
    "dump",
    "fsync_directory",
    "in_parallel",
    "link_new",
    "make_directory",
    "replace",
    "sync_file",
    "write_all",
    "write_file",
    "write_temp",
]

FsyncDirectory = Callable[[str], None]

#: Temp names unique within this process; the pid makes them unique among the processes
#: sharing a state directory (``tempfile`` would do the same, and load more at every start).
_temp_numbers = itertools.count()


def fsync_directory(directory: str) -> None:
    """Make a creation, rename or removal inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directory(path: str, fsync_dir: FsyncDirectory = fsync_directory) -> None:
    """Make the directory ``path`` (and any missing parent) durable: each one's entry
    synced in the directory that holds it, once per process (``os.makedirs`` syncs
    none: a power cut could take a folder away with the durable files inside it). A
    folder another process made is synced here too before it is used, since that
    process may not have synced it yet."""
    if path in _durable_directories and os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.isdir(parent):
        make_directory(parent, fsync_dir)
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    fsync_dir(parent or os.curdir)
    _durable_directories.add(path)


#: The directories ``make_directory`` made durable in this process.
_durable_directories: set[str] = set()


def dump(value: Any) -> bytes:
    """The on-disk form of every record: sorted keys, UTF-8, one line."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"


def write_all(fd: int, data: bytes, offset: int = 0) -> None:
    """``pwrite`` all of ``data`` at ``offset`` (a write may be short, e.g. on a full disk)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def write_temp(directory: str, data: bytes) -> str:
    """Write ``data`` to a fresh O_EXCL temp file in ``directory`` and sync it.

    ``fdatasync``, not ``fsync``: it still makes the size and the blocks durable (what
    reading the data back needs) and skips the times, which no reader relies on.

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
        write_all(fd, data)
        os.fdatasync(fd)
    except BaseException:
        os.unlink(temp)
        raise
    finally:
        os.close(fd)
    return temp


def write_file(path: str, data: bytes) -> None:
    """Write ``path`` whole (created or truncated), not yet durable: see ``sync_file``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def sync_file(path: str) -> None:
    """Make the data of ``path`` durable (not its name: that is its directory's fsync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def in_parallel(first: Callable[[], None], second: Callable[[], None]) -> None:
    """Run two independent syncs at once, ``first`` in this thread: the disk flushes its
    cache once for both, so the caller waits about as long as for one. Raises the first
    error after both have ended.

    ``_thread`` rather than ``threading.Thread``: ``Thread.start`` waits until the new
    thread runs, which on a busy machine can take longer than the sync it would overlap.
    """
    errors: list[BaseException] = []
    second_done = _thread.allocate_lock()
    second_done.acquire()

    def run_second() -> None:
        try:
            second()
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)
        finally:
            second_done.release()

    _thread.start_new_thread(run_second, ())
    try:
        first()
    finally:
        second_done.acquire()
    if errors:
        raise errors[0]


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


def link_new(source: str, path: str, fsync_dir: FsyncDirectory = fsync_directory) -> None:
    """Give the complete, already fsynced file ``source`` the new name ``path``, or raise
    ``FileExistsError`` and change nothing: ``create_new`` for a file written earlier."""
    os.link(source, path)
    fsync_dir(os.path.dirname(path))


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
