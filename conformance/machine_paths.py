"""The paths of the machine a run ran on, kept out of the text its reports quote.

A runtime's stderr and messages, and the kit's own about it (a listing command that
failed), quote paths: a library's traceback names its files under the directory the
run started in (its virtual environment there), the interpreter's under the user's
home. Reports are read, and committed, elsewhere, so they show the first relative to
that directory, as the run's command line already names them, and the second under
``~``. The kit's own scratch directories (``retryproof-<scenario>-<random>`` in the
temporary directory, where every harness keeps its state and works) are shown as
``{scratch}``: a path a faulty runtime's message quotes then reads the same on every
run and every machine.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

#: A path in a longer one is not this one's ("/mnt/work/a"); the root itself ends where
#: its path does ("/work/a" is not the start of "/work/ab").
_BEFORE, _END = r"(?<![\w.~/-])", r"(?![\w.~-])"
#: What a kit scratch directory is shown as (``adapters.process_groups.Scratch``).
SCRATCH = "{scratch}"


def without_machine_paths(value: Any, directory: str, home: str, temporary: str | None = None) -> Any:
    """``value`` (a string, or lists, tuples and mappings of them, as evidence is) with
    every kit scratch directory in ``temporary`` (default: the system's temporary
    directory) shown as ``SCRATCH``, then every path under ``directory`` made relative
    to it (the directory itself is ``.``), then every path under ``home`` starting with
    ``~``. A root that is not an absolute path below ``/`` is left alone, as is
    everything that is not a string."""
    rules: list[tuple[re.Pattern[str], str]] = []
    roots: list[str] = []
    temporary = (tempfile.gettempdir() if temporary is None else temporary).rstrip("/")
    if os.path.isabs(temporary):  # first: the temporary directory may lie under either root
        rules.append((re.compile(_BEFORE + re.escape(temporary) + r"/retryproof-[\w-]+" + _END), SCRATCH))
        roots.append(temporary)
    for root, below, itself in ((directory, "", "."), (home, "~/", "~")):
        root = root.rstrip("/")
        if os.path.isabs(root):  # "/" is "" by now: not a root to strip
            rules.append((re.compile(_BEFORE + re.escape(root) + "/"), below))
            rules.append((re.compile(_BEFORE + re.escape(root) + _END), itself))
            roots.append(root)
    return _replaced(value, rules, tuple(roots))


def _replaced(value: Any, rules: list[tuple[re.Pattern[str], str]], roots: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        # Every rule matches its root's text, so a string holding none (most evidence:
        # ids, ops, digests) is left as it is without trying each rule.
        if any(root in value for root in roots):
            for pattern, replacement in rules:
                value = pattern.sub(replacement, value)
        return value
    if isinstance(value, Mapping):
        return {key: _replaced(item, rules, roots) for key, item in value.items()}
    if isinstance(value, list):
        return [_replaced(item, rules, roots) for item in value]
    if isinstance(value, tuple):
        return tuple(_replaced(item, rules, roots) for item in value)
    return value


def typed_interpreter(directory: str, home: str) -> str:
    """This interpreter as a user types it to run it again from ``directory``: its bare
    name when PATH finds this very file by it (an active virtual environment), else its
    path shown as reports show paths (relative to ``directory``, under ``home`` from
    ``~``). Never a bare ``python`` that PATH resolves to another interpreter, one
    without the kit."""
    executable = os.path.abspath(sys.executable)
    name = os.path.basename(executable)
    found = shutil.which(name)
    if found is not None and os.path.abspath(found) == executable:
        return name
    shown = str(without_machine_paths(executable, directory, home))
    return shown if "/" in shown else f"./{shown}"  # a bare name would be looked up on PATH


def typed_line(command: Sequence[str], one_word: bool = False) -> str:
    """``command`` as shell text, a first word under ``~/`` keeping ``~/`` outside the
    quotes, where the shell expands it (the kit does not); with ``one_word``, one shell
    word whose value is that line, the way ``--harness`` takes a command line."""
    first, *rest = command
    home = "~/" if first.startswith("~/") else ""
    line = shlex.join([first[len(home) :], *rest])
    return home + (shlex.quote(line) if one_word else line)
