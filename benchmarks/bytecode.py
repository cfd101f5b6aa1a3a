"""Whether the kit's modules have current bytecode, which every harness start and kit
run below depends on.

A wheel install has it (pip compiles as it installs). An editable install runs the
source tree, where an interpreter that may not write bytecode (``PYTHONDONTWRITEBYTECODE``,
a read-only tree) compiles every module it imports at every start: a reference harness
start then costs about half as much CPU again (measured on 2 CPUs: 56-60 ms CPU from
spawn to exit of a hello, 40 ms once compiled), and a run starts about a hundred.
"""

from __future__ import annotations

import importlib.util
import os


def without_bytecode() -> list[str]:
    """The kit's source files with no bytecode cached beside them, or an older one."""
    missing = []
    for part in ("spec", "conformance", "adapters", "reference_impl"):
        spec = importlib.util.find_spec(f"retryproof.{part}")
        assert spec is not None and spec.submodule_search_locations is not None
        for folder in spec.submodule_search_locations:
            for root, _, files in os.walk(folder):
                for name in files:
                    if not name.endswith(".py"):
                        continue
                    source = os.path.join(root, name)
                    cached = importlib.util.cache_from_source(source)
                    if not os.path.exists(cached) or os.path.getmtime(cached) < os.path.getmtime(source):
                        missing.append(source)
    return missing


def warning() -> str | None:
    """A line saying the figures include compiling, when some module has no current bytecode."""
    missing = without_bytecode()
    if not missing:
        return None
    return (
        f"WARNING: {len(missing)} of the kit's modules have no current bytecode (e.g. {missing[0]}), "
        "so the figures above include compiling them at every start: in the source tree of an editable "
        "install, run 'python -m compileall -q spec conformance adapters reference_impl' first"
    )
