"""The POSIX recipes that make one file step durable, and nothing else.

A stage of a creation counts as done only when a crash right after it (SIGKILL or a
power cut) cannot undo it, so each recipe that makes a name ends with an fsync of the
directory that holds it. Every such recipe takes that directory fsync as a parameter: the
runtime passes its own overridable method, so a deliberately faulty variant can drop it
and the kit's durability trace must notice.

Two kinds of record:

* a *document* (a task, a report) appears whole under its name or not at all: it is
  written and fsynced under another name first, then linked or renamed into place;
* a *log* (a receipt's states) is a file of one JSON object a line, each line a complete
  state, the last complete one current. It appears whole, like a document, with its
  first line; later states are appended, so a state after the first costs one
  ``fdatasync`` and no name operation. An appended line a crash cut short never became
  durable (its ``fdatasync`` had not returned, so nothing after it began) and readers
  skip it: the state before it stands. A log without a complete line cannot come from a
  crash, only from damage, and reads as an I/O error, never as "no state": a receipt
  read as absent would let a retry create a second task. A log is created padded with
  NUL bytes, and appends overwrite that padding: rewriting bytes the file already holds
  changes no metadata, so the ``fdatasync`` writes the data and commits no file-system
  journal (preallocated WAL segments do the same).
"""

from __future__ import annotations

import errno
import itertools
import json
import os
from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "append_line",
    "create_log",
    "create_new",
    "dump",
    "fsync_directory",
    "last_line",
    "link_new",
    "replace",
    "write_all",
    "write_temp",
]

FsyncDirectory = Callable[[str], None]

#: Temp names unique within this process; the pid makes them unique among the processes
#: sharing a state directory (``tempfile`` would do the same, and load more at every start).
_temp_numbers = itertools.count()

#: The size a log is created with: its first line, then NUL bytes for the later ones.
#: One file-system block, which even a one-line file occupies; a receipt's three states
#: take under 2 KiB at the longest submission id. A log that outgrows it still works: the
#: append then extends the file, and ``fdatasync`` commits the new size.
LOG_SIZE = 4096


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


def write_all(fd: int, data: bytes, offset: int = 0) -> None:
    """``pwrite`` all of ``data`` at ``offset`` (a write may be short, e.g. on a full disk)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


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
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.unlink(temp)
        raise
    finally:
        os.close(fd)
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


def create_log(path: str, first_line: bytes, fsync_dir: FsyncDirectory = fsync_directory) -> None:
    """Start the log ``path`` with ``first_line`` and its padding, or raise
    ``FileExistsError`` and change nothing (``create_new``: it appears whole or not at all)."""
    create_new(path, first_line + b"\0" * max(0, LOG_SIZE - len(first_line)), fsync_dir)


def append_line(path: str, line: bytes) -> None:
    """Append ``line`` to the log ``path`` and make it durable (no name changes, so no
    directory fsync). The caller excludes other writers of the log."""
    fd = os.open(path, os.O_RDWR)
    try:
        data = _read_fd(fd)
        end = len(data.rstrip(b"\0"))
        if end and data[end - 1 : end] != b"\n":
            line = b"\n" + line  # end a line a crash cut short, so it stays one bad line
        write_all(fd, line, end)
        os.fdatasync(fd)
    finally:
        os.close(fd)


def last_line(path: str) -> Any:
    """The last complete line of the log ``path``, parsed; ``None`` when there is no file.
    A line that does not parse as a JSON object (an append cut short by a crash: its
    bytes are partly NUL or missing) is skipped; a log with no such line is damaged
    (``OSError`` EIO)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        value = _last_line(_read_fd(fd))
    finally:
        os.close(fd)
    if value is None:
        raise OSError(errno.EIO, "the log holds no complete state", path)
    return value


def _last_line(data: bytes) -> Any:
    for line in reversed(data.rstrip(b"\0").split(b"\n")):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _read_fd(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)
