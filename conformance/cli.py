"""The ``retryproof`` command line.

Each subcommand lives in its own module and is imported only when used, so
``retryproof digest`` stays fast and a broken optional part cannot break the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Iterator

from retryproof.conformance import __version__
from retryproof.conformance.errors import KitError
from retryproof.conformance.options import (
    CALL_TIMEOUT_S,
    CONCURRENCY,
    START_TIMEOUT_S,
    available_cpus,
    given,
    id_list,
    implementation_names,
    job_count,
    racing_callers,
    report_formats,
    scenario_ids,
    seconds,
    shard_spec,
)

#: Every subcommand is ``retryproof.conformance.commands.<name>.main(args)``.
COMMANDS = ("run", "list", "validate-report", "digest", "selftest", "replay", "diff", "merge", "compare", "matrix")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument like every other user error: an
    ``error:`` line, a ``hint:`` line, exit 2 (not a usage dump)."""

    def error(self, message: str):
        self.exit(2, f"error: {message}\nhint: see '{self.prog} --help'\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="retryproof",
        description="Conformance test kit for retry-safe side effects in agent runtimes.",
    )
    parser.add_argument("--version", action="version", version=f"retryproof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser("run", help="certify a runtime against the contract and write reports")
    target = run.add_mutually_exclusive_group()
    target.add_argument(
        "--harness", type=given, metavar="CMD", help="harness command line (default: the bundled reference runtime)"
    )
    target.add_argument(
        "--python", type=given, metavar="MODULE:FACTORY", help="host a Python runtime class in a harness subprocess"
    )
    target.add_argument(
        "--binding",
        type=given,
        metavar="FILE",
        help="an MCP server or HTTP API described by a binding file (spec/README.md)",
    )
    run.add_argument("--only", type=scenario_ids, metavar="IDS", help="comma-separated scenario ids to run")
    run.add_argument(
        "--skip", type=id_list, metavar="IDS", default=[], help="comma-separated scenario ids to leave out"
    )
    run.add_argument(
        "--out", type=given, metavar="DIR", help="report directory (default: reports/<implementation name>/)"
    )
    run.add_argument(
        "--format",
        type=report_formats,
        default=["md", "json", "junit"],
        metavar="FMTS",
        help="md,json,junit,html,badge",
    )
    run.add_argument("--seed", type=int, metavar="N", help="seed for every random choice (default: random, printed)")
    run.add_argument(
        "--concurrency",
        type=racing_callers,
        default=CONCURRENCY,
        metavar="N",
        help="callers in the A4 scenarios, at least 2 (one caller cannot race)",
    )
    run.add_argument("--baseline", metavar="FILE", help="expected failures; a listed failure that passes is reported")
    run.add_argument(
        "--call-timeout", type=seconds, default=CALL_TIMEOUT_S, metavar="S", help="seconds to wait for one response"
    )
    run.add_argument(
        "--start-timeout", type=seconds, default=START_TIMEOUT_S, metavar="S", help="seconds to wait for the handshake"
    )
    run.add_argument(
        "--jobs",
        type=job_count,
        default=available_cpus(),
        metavar="N",
        help="scenarios run at once (default: the CPUs this process may use); reports and verdict do not depend on it",
    )
    run.add_argument(
        "--shard",
        type=shard_spec,
        metavar="K/N",
        help="run the K-th of N deterministic parts of the selection (CI matrices); join them with 'retryproof merge'",
    )

    sub.add_parser("list", help="print the scenario catalogue")

    validate = sub.add_parser("validate-report", help="check a report.json against the report schema")
    validate.add_argument("file")

    digest = sub.add_parser("digest", help="print the write-task-v1 digest of a task object")
    digest.add_argument("file", nargs="?", default="-", help="a JSON file, or - for stdin (default)")
    digest.add_argument("--canonical", action="store_true", help="print the canonical JSON instead of the digest")
    digest.add_argument("--jsonl", action="store_true", help="one task per line in, one answer per line out")

    selftest = sub.add_parser(
        "selftest", help="run the catalogue against the reference and every bundled faulty runtime"
    )
    selftest.add_argument(
        "--out", type=given, metavar="DIR", default="reports/selftest", help="where the kill matrix is written"
    )
    selftest.add_argument("--seed", type=int, default=0, metavar="N")
    selftest.add_argument(
        "--jobs", type=job_count, default=available_cpus(), metavar="N", help="scenarios run at once (default: CPUs)"
    )

    replay = sub.add_parser("replay", help="re-run a FUZZ-MODEL replay file against a harness")
    replay.add_argument("file")
    replay_target = replay.add_mutually_exclusive_group()
    replay_target.add_argument(
        "--harness",
        type=given,
        metavar="CMD",
        help="harness command line (default: the bundled reference runtime, for a file recorded from it)",
    )
    replay_target.add_argument(
        "--binding", type=given, metavar="FILE", help="an MCP server or HTTP API described by a binding file"
    )
    diff = sub.add_parser("diff", help="compare two report.json files: regressions, fixes, verdict change")
    diff.add_argument("old", metavar="OLD.json")
    diff.add_argument("new", metavar="NEW.json")
    merge = sub.add_parser("merge", help="merge the reports of 'run --shard K/N' runs into the report of the whole run")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json", help="the report.json of every shard")
    merge.add_argument("--out", type=given, metavar="DIR", required=True, help="where the merged reports are written")
    merge.add_argument(
        "--format",
        type=report_formats,
        default=["md", "json", "junit"],
        metavar="FMTS",
        help="md,json,junit,html,badge",
    )

    compare = sub.add_parser("compare", help="implementations side by side, from their report.json files")
    compare.add_argument("reports", nargs="+", metavar="REPORT.json")
    compare.add_argument(
        "--out",
        type=given,
        metavar="DIR",
        default="reports/compare",
        help="where comparison.md and comparison.html are written",
    )

    matrix = sub.add_parser(
        "matrix", help="set up, run and compare every bundled implementation (adapters/implementations/)"
    )
    matrix.add_argument(
        "--out", type=given, metavar="DIR", default="reports", help="reports/<target>/ and reports/matrix/"
    )
    matrix.add_argument(
        "--only", type=implementation_names, metavar="NAMES", help="comma-separated implementation folders"
    )
    matrix.add_argument("--seed", type=int, default=1, metavar="N")
    matrix.add_argument("--no-install", action="store_true", help="skip each implementation's 'setup install'")
    return parser


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM (how CI cancels a job) end every harness process
    group and remove every scratch directory at once, whatever thread started them,
    then unwind the command as ``Interrupted``: no report of this run is written, so
    the reports of an earlier run in the same directory stay as they were."""
    from retryproof.adapters.process import interrupt

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module_name = "retryproof.conformance.commands." + args.command.replace("-", "_")
    try:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            raise KitError(f"'retryproof {args.command}' is not available in this build yet") from None
        with _interruptible():
            return module.main(args)
    except KitError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        from retryproof.adapters.process import end_everything

        end_everything()
        print("interrupted", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    except BrokenPipeError:
        # The reader went away (`retryproof list | head`): stop quietly, and keep the
        # interpreter's final flush from raising again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
