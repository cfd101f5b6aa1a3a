"""The kit run as a user runs it, for the tests: ``retryproof`` in a subprocess.

Many tests certify a deliberately broken or independent harness and read its
report.json; they all go through ``certify`` so that how the kit is invoked, and
where its report is read from, is written once; a run several tests read goes through
``once_per_session``. pytest puts this folder on ``sys.path``, as it holds the top
conftest.py and no ``__init__.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import pytest

from retryproof.adapters.connection import Connection, HarnessStartError
from retryproof.conformance.options import REFERENCE_COMMAND

Shared = TypeVar("Shared")

CLI = (sys.executable, "-m", "retryproof.conformance.cli")
#: The reference as the kit starts it when no target is named (``python -S launch.py``:
#: the same ``main`` as ``python -m retryproof.reference_impl``, without ``site``), for a
#: test that needs the reference, not the command a vendor types (tests/reference_impl
#: start that one). Paired on 2 CPUs: 0.022 CPU-s a start over stdin instead of 0.030,
#: 0.050 instead of 0.058 serving HTTP; the suite starts the reference about a thousand times.
REFERENCE = REFERENCE_COMMAND
#: The interpreter for a harness written in standard-library Python alone (the independent
#: runtimes of tests/independent), or that finds the kit's modules itself
#: (tests/conformance/kit_from_source.py): without ``site`` (``-S``), as the reference is
#: started. A hello and shutdown of one costs 0.041-0.047 CPU-s instead of 0.051-0.055
#: (2 CPUs, load 5); the suite starts them about 250 times.
STDLIB_PYTHON = f"{sys.executable} -S"
#: For a pytest session a test starts to try the kit's pytest plugin (conftest.py's
#: ``pytester``, and test_hostile_harnesses' own): the two third-party plugins of this
#: environment that such a session never uses (they come with the test extra's hypothesis
#: and mcp). Importing them costs every pytest process, each pytest-xdist worker included
#: (the figures are in commit 6fdbbc9), and every in-process session again.
UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:anyio")


def retryproof(*args: str, timeout: float = 120, **options: Any) -> subprocess.CompletedProcess[str]:
    """``retryproof ARGS``, its output captured as text."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, **options)


def retryproof_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``retryproof ARGS`` as ``retryproof`` answers it, but run by the CLI's ``main`` in
    this process, ``env`` (when given) as the whole environment meanwhile: its exit code,
    output, reports and step summary are the same, and a new interpreter would cost each
    call 0.15-0.3 CPU-s of start-up and imports. For a test about what a command answers
    (validate-report, merge, diff, compare; a run, through ``certify``), not about the
    process: what only a process shows (a signal, a closed stdout, an uncaught exception's
    traceback, a bound on a hang) is tested with ``retryproof``."""
    from retryproof.conformance.cli import main

    out, err = io.StringIO(), io.StringIO()
    environment = mock.patch.dict(os.environ, env, clear=True) if env is not None else contextlib.nullcontext()
    with environment, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit:  # argparse's usage errors, --help
            code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
    if code == 130:  # the CLI answered a Ctrl-C: it was meant for the test session
        raise KeyboardInterrupt
    return subprocess.CompletedProcess([*CLI, *args], code, out.getvalue(), err.getvalue())


def matrix_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """``retryproof matrix``'s ``retryproof run`` children run in this process
    (``retryproof_here``, in the directory the matrix runs them from, their output passed
    on); its setup scripts stay processes. For a test about what the matrix does with its
    runs (their commands, reports, README, setup steps), not about their processes (a real
    one ended with SIGTERM is tests/adapters/test_bundled_implementations.py's): a run in a
    process of its own costs 0.35 CPU-s more."""
    from retryproof.conformance.commands import matrix

    real = matrix._finished
    kit_run = list(CLI)

    def finished(command: list[str], timeout: float, cwd: Path | None = None) -> int:
        if command[: len(kit_run)] != kit_run:
            return real(command, timeout, cwd)
        with monkeypatch.context() as here:
            here.chdir(cwd or Path.cwd())
            done = retryproof_here(*command[len(kit_run) :])
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode

    monkeypatch.setattr(matrix, "_finished", finished)


def certify(
    out: Path,
    harness: str,
    *args: str,
    seed: int | str = 1,
    formats: str = "json",
    timeout: float = 120,
    in_process: bool = False,
    **options: Any,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``retryproof run --harness HARNESS`` into ``out``: the finished process and the
    report.json it wrote (None when it wrote none). ``in_process``: through
    ``retryproof_here`` (0.13 CPU-s for a run of two scenarios against a fake harness,
    0.45 in a process of its own), for a test about how a runtime is judged, not about the
    process, a hanging runtime's too (the kit's timeouts bound its waits, the test's phase
    limit the kit: tests/phase_limit.py); FUZZ-MODEL stays in a process, whose ``timeout``
    bounds it (its Hypothesis settings would inherit the test session's)."""
    command = ("run", "--harness", harness, "--seed", str(seed), "--out", str(out), "--format", formats, *args)
    done = retryproof_here(*command, **options) if in_process else retryproof(*command, timeout=timeout, **options)
    report = out / "report.json"
    return done, json.loads(report.read_text()) if report.exists() else None


def by_id(report: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A report's scenarios by id (none when there is no report)."""
    return {scenario["id"]: scenario for scenario in (report or {}).get("scenarios", [])}


def claims_while_writing(monkeypatch: Any, module_name: str, directory: Path) -> list[bool]:
    """Watch ``write_atomically`` of the module ``module_name``: for each file written,
    whether ``directory`` (the report directory) was still claimed by the writer at that
    moment. The module is looked up by name, as the code under test imports it: an
    in-process pytester run earlier in the session drops the modules it imported from
    ``sys.modules`` but leaves them as attributes of their packages, so ``from package
    import module`` may hand back a copy nothing calls any more."""
    from retryproof.conformance.errors import KitError
    from retryproof.conformance.writers.files import prepare_directory

    module = importlib.import_module(module_name)
    held: list[bool] = []
    write = module.write_atomically

    def probing(path: str, text: str) -> None:
        try:
            prepare_directory(str(directory)).release()
            held.append(False)
        except KitError:
            held.append(True)
        write(path, text)

    monkeypatch.setattr(module, "write_atomically", probing)
    return held


def once_per_session(factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], Shared]) -> Shared:
    """``compute(directory)`` once per test session, for a module fixture that several
    tests read. Under pytest-xdist a module's tests are dealt to every worker and each
    would run the module's fixtures again; here the first worker computes under a lock
    in the session's shared temporary directory and the others wait and read its
    (pickled) result. A computation that raised is not stored: the next worker repeats
    it and fails the same way."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return compute(factory.mktemp(name))
    root = factory.getbasetemp().parent  # one per session, shared by its workers
    stored = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if stored.exists():
            return pickle.loads(stored.read_bytes())
        result = compute(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root)))
        stored.write_bytes(pickle.dumps(result))
        return result


def until(condition: Callable[[], object], within_s: float, poll_s: float = 0.05) -> bool:
    """Whether ``condition`` held within ``within_s``, asked every ``poll_s``: a test's
    wait for what another process does, bounded, its assertion left to the caller."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def failed_start(connection: Connection) -> tuple[HarnessStartError, float]:
    """A start that must fail (a harness's or a binding server's): its failure and how
    long it took to come; the connection is ended either way."""
    began = time.monotonic()
    try:
        with pytest.raises(HarnessStartError) as failed:
            connection.start()
    finally:
        connection.kill()
    return failed.value, time.monotonic() - began
