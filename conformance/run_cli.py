"""``retryproof run``, ``retryproof list`` and ``retryproof validate-report``."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import sys
from typing import Any

import yaml
from tabulate import tabulate

from adapters.python_host import host_command
from conformance.catalogue import catalogue
from conformance.errors import KitError, load_user_file
from conformance.runner import Options, probe, run as run_catalogue
from conformance.scenarios import registry
from conformance.writers.console import ConsoleWriter
from conformance.writers.files import FORMATS, ReplayFileWriter, ReportFileWriter, prepare_directory

REFERENCE_COMMAND = (sys.executable, "-m", "reference_impl")


def harness_target(harness: str | None, python: str | None) -> tuple[tuple[str, ...], str]:
    """The harness command line and the CLI arguments that name it again (neither
    given: the bundled reference runtime)."""
    if python:
        if ":" not in python:
            raise KitError(f"--python {python!r} is not of the form module:factory", "for example --python my_runtime.harness:make_runtime")
        return tuple(host_command(python)), f"--python {shlex.quote(python)}"
    if harness:
        try:
            command = tuple(shlex.split(harness))
        except ValueError as exc:
            raise KitError(f"cannot parse --harness: {exc}", 'quote the whole command line: --harness "node harness.js"') from None
        if not command:
            raise KitError("--harness is empty", 'give the command line that starts your harness, e.g. --harness "node harness.js"')
        return command, f"--harness {shlex.quote(harness)}"
    return REFERENCE_COMMAND, ""


def load_baseline(path: str) -> frozenset[str]:
    """The expected-failure ids of a baseline file (``spec verdict.baseline.format``)."""
    document = load_user_file(path, "baseline", yaml.safe_load, "YAML or JSON", "expected a YAML or JSON file: {expected_failures: [SCENARIO-ID, ...]}")
    entries = document.get("expected_failures") if isinstance(document, dict) else None
    if not isinstance(entries, (list, dict)) or not all(isinstance(item, str) for item in entries):
        raise KitError(f"baseline {path} has no list of expected_failures", "expected {expected_failures: [SCENARIO-ID, ...]}")
    unknown = sorted(set(entries) - {item.id for item in catalogue()})
    if unknown:
        raise KitError(f"baseline {path} names unknown scenario id(s): {', '.join(unknown)}", "see 'retryproof list'")
    return frozenset(entries)


def run_options(args) -> Options:
    """The options of a run from parsed arguments: those of ``retryproof run``, or the
    pytest plugin's, which carry the same names (``harness``, ``python``, ``only``,
    ``skip``, ``seed``, ``concurrency``, ``call_timeout``, ``start_timeout``, ``baseline``)."""
    command, target = harness_target(args.harness, args.python)
    return Options(
        command=command,
        target=target,
        seed=args.seed if args.seed is not None else secrets.randbelow(2**31),
        concurrency=args.concurrency,
        only=tuple(args.only or ()),
        skip=tuple(args.skip or ()),
        call_timeout=args.call_timeout,
        start_timeout=args.start_timeout,
        baseline=load_baseline(args.baseline) if args.baseline else frozenset(),
        baseline_file=args.baseline,
    )


def _slug(name: Any) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-.")
    return slug[:64] or "unnamed"


def run(args) -> int:
    formats = list(dict.fromkeys(args.format))
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:
        raise KitError(f"unknown report format(s): {', '.join(unknown)}", f"choose from {','.join(FORMATS)}")
    options = run_options(args)
    if args.out:
        prepare_directory(args.out)  # a report that cannot be written is known before the harness starts
    hello = probe(options)
    out = args.out or os.path.join("reports", _slug(hello.get("implementation", {}).get("name")))
    if not args.out:
        prepare_directory(out)
    writers = [ReportFileWriter(out, fmt) for fmt in formats]
    replays = ReplayFileWriter(out)
    finished = run_catalogue(options, hello, [ConsoleWriter(), *writers, replays])
    for path in [writer.path for writer in writers] + replays.paths:
        print(f"wrote {path}")
    return finished.verdict.exit_code


def list_scenarios(args) -> int:
    implemented = registry()
    rows = [
        (item.id, item.level, ", ".join(item.checks), ", ".join(item.checklist), ", ".join(item.needs), "yes" if item.id in implemented else "NO", item.title)
        for item in catalogue()
    ]
    print(tabulate(rows, headers=("id", "level", "checks", "answers", "needs", "implemented", "title"), tablefmt="github"))
    return 0
