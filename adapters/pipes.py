"""The kit's ends of a child process's pipes, never waited on without a bound.

A harness or a server may start a process that escapes its group (``setsid``) and
keeps the child's stdout or stderr open: after the group is SIGKILLed, a thread in a
blocking ``read`` on that pipe would never see end of file. So every pipe thread waits
in ``poll`` beside a wake-up pipe; a stop lets the threads read to end of file for a
short grace, names the processes that still hold a pipe (``holders``), wakes the
threads and closes everything. The same holds for writing: a child that stops reading
blocks a writer only until the stop.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

__all__ = ["ChildPipes", "LineTooLong", "holders"]

#: The longest a blocked writer waits before it looks again whether the kit closed its pipe.
RECHECK_MS = 100


class LineTooLong(Exception):
    """A line longer than the reader's limit: the stream no longer makes sense."""


class ChildPipes:
    """``streams`` of one child (any of its stdin, stdout, stderr) and the threads that
    read or write them. ``stop`` ends it all, once."""

    def __init__(self, streams: Sequence[IO[bytes]]):
        self.streams = tuple(streams)
        self.threads: list[threading.Thread] = []
        # Readable once the kit stops listening: ends every poll of the pipe threads.
        self._wake_read, self._wake_write = os.pipe()
        # Held around every write and every close: a writer that is not a joined pipe
        # thread (an MCP call) must never write to a descriptor number that a close has
        # freed for reuse by another file.
        self._io_lock = threading.Lock()
        self._stopped = False

    def spawn(self, target: Callable[..., None], *args: Any, name: str) -> None:
        """Run ``target(*args)`` in a daemon thread that ``stop`` joins."""
        thread = threading.Thread(target=target, args=args, daemon=True, name=name)
        self.threads.append(thread)
        thread.start()

    def chunks(self, stream: IO[bytes]) -> Iterator[bytes]:
        """What the child writes to ``stream``, until end of file or the kit's wake-up."""
        fd = stream.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        while True:
            ready = dict(poller.poll())
            if self._wake_read in ready:
                return
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            yield chunk

    def lines(self, stream: IO[bytes], limit: int) -> Iterator[bytes]:
        """The lines of ``stream`` (newline kept), and a last one without its newline at
        end of file; ``LineTooLong`` once a line outgrows ``limit`` bytes."""
        buffer = bytearray()
        for chunk in self.chunks(stream):
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0 and end <= limit:
                line = bytes(buffer[: end + 1])
                del buffer[: end + 1]
                yield line
            if len(buffer) > limit:
                raise LineTooLong(f"a line longer than {limit} bytes")
        if buffer:
            yield bytes(buffer)

    def write_some(self, stream: IO[bytes], data: bytes) -> int | None:
        """Write what of ``data`` the pipe takes now, never waiting: the bytes written
        (0 when the pipe is full), None when the child closed its end, or the kit closed
        it or stopped listening."""
        with self._io_lock:
            if self._stopped or stream.closed:
                return None
            fd = stream.fileno()
            os.set_blocking(fd, False)
            try:
                return os.write(fd, data)
            except BlockingIOError:
                return 0
            except OSError:
                return None

    def write_all(self, stream: IO[bytes], data: bytes) -> bool:
        """Write ``data`` to ``stream`` (made non-blocking here); False when the child
        closed its end, or the kit closed it or stopped listening first."""
        with self._io_lock:
            if self._stopped or stream.closed:
                return False
            fd = stream.fileno()
            os.set_blocking(fd, False)
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            poller.register(self._wake_read, select.POLLIN)
        view = memoryview(data)
        while view:
            with self._io_lock:
                if self._stopped or stream.closed:
                    return False
                try:
                    view = view[os.write(fd, view) :]
                    continue
                except BlockingIOError:
                    pass
                except OSError:
                    return False
            # Writable, woken or closed, the loop looks again under the lock; the bound
            # covers a stop that closed both descriptors before this poll began.
            poller.poll(RECHECK_MS)
        return True

    def close(self, stream: IO[bytes]) -> None:
        """Close one of the streams (a caller's end of input) while no write is under way."""
        with self._io_lock:
            try:
                stream.close()
            except OSError:
                pass

    def stop(self, grace_s: float, join_s: float) -> list[dict[str, Any]]:
        """Once the child's group is gone: let the threads read to end of file for up to
        ``grace_s``, then wake them, join each for up to ``join_s`` and close every
        pipe. The processes still holding a pipe after the grace are returned (a second
        call returns nothing: it has all been done)."""
        with self._io_lock:
            if self._stopped:
                return []
            self._stopped = True
        others = [thread for thread in self.threads if thread is not threading.current_thread()]
        deadline = time.monotonic() + grace_s
        for thread in others:
            thread.join(max(0.0, deadline - time.monotonic()))
        held = holders(self.streams) if any(thread.is_alive() for thread in others) else []
        os.write(self._wake_write, b"x")
        for thread in others:
            thread.join(join_s)
        with self._io_lock:
            for stream in self.streams:
                try:
                    stream.close()
                except OSError:
                    pass
            for fd in (self._wake_read, self._wake_write):
                os.close(fd)
        return held


def holders(streams: Sequence[IO[bytes]]) -> list[dict[str, Any]]:
    """The processes other than the kit that hold one of ``streams`` open (found in
    /proc; elsewhere, one entry saying that some process does)."""
    pipes = set()
    for stream in streams:
        try:
            pipes.add(f"pipe:[{os.fstat(stream.fileno()).st_ino}]")
        except (OSError, ValueError):
            pass
    found: list[dict[str, Any]] = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid()]
    except OSError:
        return [{"pid": None, "command": "a process outside the child's group holds its pipes open"}]
    for pid in pids:
        try:
            if not any(os.readlink(f"/proc/{pid}/fd/{fd}") in pipes for fd in os.listdir(f"/proc/{pid}/fd")):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        found.append({"pid": pid, "command": command[:500]})
    return found
