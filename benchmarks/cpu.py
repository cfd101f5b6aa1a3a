"""CPU seconds as the benchmarks count them: a process's own and those of the children
it has reaped (harnesses, servers, pytest workers), the figure a loaded machine changes
least (on N CPUs a run takes at least its CPU seconds over N)."""

from __future__ import annotations

import resource


def cpu_seconds() -> tuple[float, float]:
    """(this process's user and system seconds, those of every child it reaped so far)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime
