"""``retryproof matrix``: the real-world matrix, regenerated.

Every bundled implementation (``adapters/implementations/<name>/`` with a
``matrix.json``) is set up with its own ``setup install``, its servers started with
``setup start``, each of its targets certified by ``retryproof run`` into
``<out>/<report>/``, and its servers stopped with ``setup stop`` -- also when a run
fails or the matrix is interrupted (SIGINT, SIGTERM). Then ``retryproof compare``
renders all the reports side by side into ``<out>/matrix/``, beside a README naming
the date, the kit and every library version. ``--only`` re-runs some implementations;
the comparison still covers every target that has a report in ``--out``.

``--seeds 1,2`` shows that a target's failures are the library's and not one seed's
luck: the first seed's reports are the matrix's (``<out>/<report>/``, compared side by
side); every further seed runs every target again, on servers started afresh, into
``<out>/seed-N/<report>/``. The README then says per target and further seed whether
every scenario ended with the same status (skips included) under the same verdict
(``reproduction``), or names each scenario that differs; the exit status is 1
when any differs, as when a target has no report. ``--seed N`` is ``--seeds N``.

``matrix.json``::

    {"targets": [{"report": "dbos-transact",
                  "harness": "adapters/implementations/dbos_transact/.venv/bin/python adapters/implementations/dbos_transact/harness.py"}]}

A target names ``"binding"`` (a binding file) instead of ``"harness"`` when the
service is certified as its users call it, and may add ``"options"``, further
``retryproof run`` arguments (a longer ``--start-timeout`` for a harness whose
library takes seconds to import, say). Harness command lines and binding paths are
relative to the repository root, where every run starts, so the committed reports
carry no machine's paths. The matrix needs a checkout (the
implementations' scripts are not part of an installed kit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retryproof.adapters import implementations as bundled
from retryproof.conformance import __version__
from retryproof.conformance.commands.compare import Column, columns_of, write_comparison
from retryproof.conformance.commands.validate_report import load_report
from retryproof.conformance.errors import KitError
from retryproof.conformance.writers.escape import md_inline
from retryproof.conformance.writers.files import prepare_directory, write_atomically

#: Bounds of every step a matrix takes (installs reach PyPI, npm or apt).
INSTALL_TIMEOUT_S = 1200
SERVER_TIMEOUT_S = 120
RUN_TIMEOUT_S = 1800
#: How long an interrupted or overrunning child has to end what it started after SIGTERM.
STOP_GRACE_S = 30


@dataclass(frozen=True)
class Target:
    report: str
    #: ``--harness`` or ``--binding``, and its argument.
    way: tuple[str, str]
    options: tuple[str, ...] = ()


def _target(entry: dict) -> Target:
    ways = [("--harness", entry["harness"])] if "harness" in entry else []
    ways += [("--binding", entry["binding"])] if "binding" in entry else []
    if len(ways) != 1:
        raise KeyError("each target names exactly one of 'harness' and 'binding'")
    return Target(entry["report"], ways[0], tuple(str(option) for option in entry.get("options", ())))


@dataclass(frozen=True)
class Implementation:
    name: str
    folder: Path
    targets: tuple[Target, ...]


def repository_root() -> Path:
    folder = Path(bundled.__file__).resolve().parent
    if not any(folder.glob("*/matrix.json")):
        raise KitError(
            "no bundled implementations found beside the installed kit",
            "run 'retryproof matrix' from a checkout installed with 'pip install -e .'",
        )
    return folder.parents[1]


def discover(root: Path) -> list[Implementation]:
    found = []
    for manifest in sorted((root / "adapters" / "implementations").glob("*/matrix.json")):
        try:
            document = json.loads(manifest.read_text(encoding="utf-8"))
            targets = tuple(_target(entry) for entry in document["targets"])
        except (ValueError, KeyError, TypeError) as exc:
            raise KitError(f"{manifest} is not a valid matrix.json: {exc}", "see 'retryproof matrix --help'") from None
        found.append(Implementation(manifest.parent.name, manifest.parent, targets))
    return found


def _finished(command: list[str], timeout: float, cwd: Path | None = None) -> int:
    """The exit status of ``command``, run to its end within ``timeout`` seconds.

    A child that overruns, or that is running when the matrix is interrupted, gets
    SIGTERM first: a ``retryproof run`` or a setup script then ends the processes it
    started itself, where ``subprocess.run``'s SIGKILL would leave them behind.
    """
    child = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL)
    try:
        return child.wait(timeout)
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _setup(implementation: Implementation, step: str, timeout: float) -> None:
    script = implementation.folder / "setup"
    try:
        status = _finished([str(script), step], timeout)
    except subprocess.TimeoutExpired:
        raise KitError(
            f"{implementation.name}: 'setup {step}' took over {timeout:.0f}s", f"run {script} {step}"
        ) from None
    if status != 0:
        raise KitError(f"{implementation.name}: 'setup {step}' exited {status}", f"run {script} {step}")


def _run(root: Path, target: Target, out: Path, seed: int) -> bool:
    """Certify one target; False when the kit could not run it (no report written)."""
    way, argument = target.way
    command = [sys.executable, "-m", "retryproof.conformance.cli", "run", way, argument]
    command += ["--out", str(out), "--seed", str(seed), "--format", "md,json,junit,html", *target.options]
    print(f"matrix: {target.report}: retryproof run {way} '{argument}' {' '.join(target.options)}", flush=True)
    try:
        status = _finished(command, RUN_TIMEOUT_S, cwd=root)
    except subprocess.TimeoutExpired:
        print(f"matrix: {target.report}: no verdict within {RUN_TIMEOUT_S}s", file=sys.stderr)
        return False
    except KeyboardInterrupt as exc:
        # The run, ended with SIGTERM, said "interrupted" on this stderr: once is enough.
        exc.reported = True  # type: ignore[attr-defined]
        raise
    return status in (0, 1) and (out / "report.json").is_file()


def main(args) -> int:
    root = repository_root()
    implementations = everything = discover(root)
    if args.only:
        unknown = sorted(set(args.only) - {i.name for i in implementations})
        if unknown:
            raise KitError(
                f"no bundled implementation {', '.join(unknown)}",
                f"choose from {', '.join(i.name for i in implementations)}",
            )
        implementations = [i for i in implementations if i.name in args.only]
    out = Path(args.out).resolve()
    with prepare_directory(str(out)):
        return _regenerate(root, implementations, everything, out, args.seeds, args.no_install)


def _report_folder(out: Path, seeds: list[int], seed: int) -> Path:
    """Where the reports of ``seed`` go: the first seed's in ``out``, each further
    seed's in ``out/seed-N/``."""
    return out if seed == seeds[0] else out / f"seed-{seed}"


def _regenerate(
    root: Path,
    implementations: list[Implementation],
    everything: list[Implementation],
    out: Path,
    seeds: list[int],
    no_install: bool,
) -> int:
    # SIGINT and SIGTERM unwind through here as Interrupted (the CLI's handler), so the
    # servers of the implementation in hand are stopped on the way out.
    missing: set[tuple[str, int]] = set()  # (report, seed) the kit could not run
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for implementation in implementations:
        if not no_install:
            _setup(implementation, "install", INSTALL_TIMEOUT_S)
        for seed in seeds:  # each seed on servers started afresh, as the first one ran
            try:
                _setup(implementation, "start", SERVER_TIMEOUT_S)
                for target in implementation.targets:
                    if not _run(root, target, _report_folder(out, seeds, seed) / target.report, seed):
                        missing.add((target.report, seed))
            finally:
                _setup(implementation, "stop", SERVER_TIMEOUT_S)

    def report(name: str, seed: int) -> tuple[str, dict[str, Any]] | None:
        """The report of ``name`` on ``seed``, read and validated once: also those --only
        left as they were; never one a failed run of this matrix left behind."""
        path = _report_folder(out, seeds, seed) / name / "report.json"
        if (name, seed) in missing or not path.is_file():
            return None
        try:
            return str(path), load_report(str(path))
        except KitError as exc:  # the kit's own fault: it costs that target its row, not the README
            print(f"matrix: {exc.message}", file=sys.stderr)
            missing.add((name, seed))
            return None

    def document(name: str, seed: int) -> dict[str, Any] | None:
        found = report(name, seed)
        return None if found is None else found[1]

    names = [target.report for implementation in everything for target in implementation.targets]
    reports = [found for found in (report(name, seeds[0]) for name in names) if found is not None]
    if not reports:
        raise KitError("no implementation produced a report", "see the output above")
    columns = columns_of(reports)
    again = {
        seed: {column.path: document(Path(column.path).parent.name, seed) for column in columns} for seed in seeds[1:]
    }
    written = write_comparison(columns, str(out / "matrix"))
    summary = out / "matrix" / "README.md"
    unrun = [report if seed == seeds[0] else f"{report} (seed {seed})" for report, seed in sorted(missing)]
    write_atomically(str(summary), _summary(columns, again, unrun, started, seeds, out))
    for path in [*written, str(summary)]:
        print(f"wrote {path}")
    differing = [
        f"{Path(column.path).parent.name} (seed {seed})"
        for seed, documents in again.items()
        for column in columns
        if _differs(column.document, documents[column.path])
    ]
    if unrun:
        print(f"matrix: no report for {', '.join(unrun)}", file=sys.stderr)
    if differing:
        print(f"matrix: failures or verdict not as on seed {seeds[0]} for {', '.join(differing)}", file=sys.stderr)
    return 1 if missing or differing else 0


def _differs(first: dict[str, Any], again: dict[str, Any] | None) -> bool:
    return again is not None and reproduction(first, again) is not None


def reproduction(first: dict[str, Any], again: dict[str, Any]) -> str | None:
    """How the run ``again`` (another seed) differs from ``first``: every scenario whose
    status changed, and the verdict. None when they are the same; else the differences,
    e.g. ``FUZZ-MODEL failed → passed; verdict NOT CONFORMANT → CONFORMANT``.

    Every status counts, not only failures and errors: a MUST scenario that passed on
    one seed and was skipped on the other was verified once and not once, and that is
    luck the column exists to show (Restate-binding's CRASH-POINTS once passed on seed 1
    and was skipped on seed 2 under a column that said "same")."""
    statuses = [{s["id"]: s["status"] for s in document["scenarios"]} for document in (first, again)]
    order = [*statuses[0], *(sid for sid in statuses[1] if sid not in statuses[0])]
    changes = [
        f"{sid} {statuses[0].get(sid, 'not run')} → {statuses[1].get(sid, 'not run')}"
        for sid in order
        if statuses[0].get(sid) != statuses[1].get(sid)
    ]
    headlines = first["verdict"]["headline"], again["verdict"]["headline"]
    if headlines[0] != headlines[1]:
        changes.append(f"verdict {headlines[0]} → {headlines[1]}")
    return "; ".join(changes) or None


def _reproduced(first: dict[str, Any], again: dict[str, Any] | None) -> str:
    """A README cell: whether the failures and the verdict came out the same."""
    if again is None:
        return "no report"
    difference = reproduction(first, again)
    if difference is not None:
        return f"**differs**: {md_inline(difference)}"
    counts = Counter(scenario["status"] for scenario in first["scenarios"])
    return f"same ({counts['failed']} failed, {counts['error']} error, {counts['skipped']} skipped)"


def _summary(
    columns: list[Column],
    again: dict[int, dict[str, dict[str, Any] | None]],
    missing: list[str],
    started: str,
    seeds: list[int],
    out: Path,
) -> str:
    further = [f"seed {seed}" for seed in again]
    lines = [
        "# The real-world matrix",
        "",
        f"Last generated {started} by `retryproof matrix --seeds {','.join(map(str, seeds))}` "
        f"(retryproof {__version__}); the side-by-side table is `comparison.md` (and `comparison.html`). "
        f"Each report has its own run date; the linked reports are seed {seeds[0]}'s.",
        "",
    ]
    if again:
        lines += [
            f"Every target also ran on {', '.join(further)}, its reports written to `seed-N/` beside "
            f"seed {seeds[0]}'s (a repository may keep seed {seeds[0]}'s alone; the command above writes "
            "them all again): that column says `same` when every scenario ended with the same status (a skip included: "
            "a scenario verified on one seed and skipped on the other is not the same result) under the same verdict, "
            "and otherwise names each scenario that differs.",
            "",
        ]
    lines += [
        "| " + " | ".join(["report", "implementation", "library version", "run started", "verdict", *further]) + " |",
        "|" + "---|" * (5 + len(further)),
    ]
    for column in columns:
        path, document = Path(column.path), column.document
        implementation = document["implementation"]
        link = os.path.relpath(path.parent / "report.md", out / "matrix")
        cells = [
            f"[{md_inline(path.parent.name)}]({link})",
            md_inline(implementation["name"]),
            md_inline(implementation["version"]),
            md_inline(document["started_at"]),
            md_inline(document["verdict"]["headline"]),
            *(_reproduced(document, documents[column.path]) for documents in again.values()),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if missing:
        lines += ["", f"No valid report (the kit could not run them, or wrote one it refuses): {', '.join(missing)}."]
    lines += [
        "",
        "Each implementation's README (`adapters/implementations/<name>/README.md`) names the root cause "
        "of every failure in the library's source and an experiment that shows it without the kit.",
        "",
        "An approval target (its verdict says `write_task not offered`) certifies a library's human-approval "
        "flow against the approval scenarios alone (P0-P3, RECOVERY-STALE-REQUEST, RECOVERY-UNKNOWN-EFFECT): "
        "its harness maps propose, approve, execute and recover onto the library's own calls. An audit "
        "failpoint the library has no hook for is injected where a real fault comes from: the store or "
        "audit sink the library writes refuses that row on command (a SQLite trigger armed at the process's "
        "start), never a change to the library; a crash after the effect is the tool's own. Each README's "
        "Faults table says which failpoints are real hooks, which are injected, and which passes therefore "
        "say nothing about the library.",
        "",
        "Not in the matrix, because they cannot run offline here: Temporal (`temporalio`'s "
        "`WorkflowEnvironment.start_local()` downloads its dev server at run time) and Inngest (the "
        "`inngest-cli` npm package fetches its binary in a postinstall script). None was faked.",
    ]
    return "\n".join(lines) + "\n"
