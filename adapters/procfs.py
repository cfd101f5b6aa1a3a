"""What Linux's ``/proc`` says about a process, read one way wherever the kit asks."""

from __future__ import annotations

import os


def stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the process's name, its state first (``R``,
    ``S``, ``Z``...), then its parent, its process group...: split after the last ")",
    since the name may hold spaces and ")". None once the process is gone, or where
    there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    end = text.rfind(")")
    return None if end < 0 else text[end + 2 :].split()


#: The states (``stat_fields``' first) of a process that has ended: a zombie, or dead.
ENDED = ("Z", "X")


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in ENDED


def visible_pids() -> list[int]:
    """Every process ``/proc`` lists (none without ``/proc``)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit()]
