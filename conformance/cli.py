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
from collections.abc import Callable, Iterator

from retryproof.conformance import __version__
from retryproof.conformance.errors import KitError

TYPE_CHECKING = False  # not typing's: importing typing would be paid by 'retryproof digest'
if TYPE_CHECKING:
    from retryproof.conformance.options import Option


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument like every other user error: an
    ``error:`` line, a ``hint:`` line, exit 2 (not a usage dump)."""

    #: The subcommand's prog, for the top parser: argparse reports a subcommand's
    #: unrecognized argument from there, and its help is the subcommand's.
    helped: str | None = None

    def error(self, message: str):
        prog = self.helped or self.prog
        _complain(prog.split()[-1], message, f"see '{prog} --help'", 2)
        self.exit(2)


def _add_option(parser: argparse._ActionsContainer, option: Option) -> None:
    parser.add_argument(f"--{option.name}", default=option.default, **option.parser_arguments())


def _run_arguments(run: argparse.ArgumentParser) -> None:
    """``run``'s options, from the one table the pytest plugin renders too."""
    from retryproof.conformance.options import RUN_OPTIONS

    run.description = (
        "The runtime under test is the bundled reference unless --harness, --python or --binding names one."
    )
    targets = run.add_mutually_exclusive_group()
    for option in RUN_OPTIONS:
        _add_option(targets if option.target else run, option)


def _validate_report_arguments(validate: argparse.ArgumentParser) -> None:
    validate.add_argument("file")


def _list_arguments(listing: argparse.ArgumentParser) -> None:
    listing.add_argument(
        "--binding", metavar="FILE", help="say which scenarios apply to the tool this binding file describes, and why"
    )


def _digest_arguments(digest: argparse.ArgumentParser) -> None:
    digest.add_argument("file", nargs="?", default="-", help="a JSON file, or - for stdin (default)")
    digest.add_argument("--canonical", action="store_true", help="print the canonical JSON instead of the digest")
    digest.add_argument("--jsonl", action="store_true", help="one task per line in, one answer per line out")


def _selftest_arguments(selftest: argparse.ArgumentParser) -> None:
    from retryproof.conformance.options import default_jobs, given, job_count

    selftest.add_argument(
        "--out", type=given, metavar="DIR", default="reports/selftest", help="where the kill matrix is written"
    )
    selftest.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of every runtime's run, for every random choice (default 0)",
    )
    selftest.add_argument(
        "--jobs", type=job_count, default=default_jobs(), metavar="N", help="scenarios run at once (default: CPUs + 1)"
    )


def _replay_arguments(replay: argparse.ArgumentParser) -> None:
    from retryproof.conformance.options import REPLAYED_OPTIONS, given

    replay.add_argument("file")
    for option in REPLAYED_OPTIONS:  # left out: what the run that wrote the file used
        replay.add_argument(f"--{option.name}", default=None, **option.parser_arguments())
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


def _diff_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("old", metavar="OLD.json")
    diff.add_argument("new", metavar="NEW.json")


def _merge_arguments(merge: argparse.ArgumentParser) -> None:
    from retryproof.conformance.options import RUN_OPTIONS, given

    merge.add_argument("reports", nargs="+", metavar="REPORT.json", help="the report.json of every shard")
    merge.add_argument("--out", type=given, metavar="DIR", required=True, help="where the merged reports are written")
    _add_option(merge, next(option for option in RUN_OPTIONS if option.name == "format"))


def _compare_arguments(compare: argparse.ArgumentParser) -> None:
    from retryproof.conformance.options import given

    compare.add_argument("reports", nargs="+", metavar="REPORT.json")
    compare.add_argument(
        "--out",
        type=given,
        metavar="DIR",
        default="reports/compare",
        help="where comparison.md and comparison.html are written",
    )


def _matrix_arguments(matrix: argparse.ArgumentParser) -> None:
    from retryproof.conformance.options import given, implementation_names, seed_list

    matrix.add_argument(
        "--out", type=given, metavar="DIR", default="reports", help="reports/<target>/ and reports/matrix/"
    )
    matrix.add_argument(
        "--only", type=implementation_names, metavar="NAMES", help="comma-separated implementation folders"
    )
    matrix.add_argument(
        "--seeds",
        "--seed",
        type=seed_list,
        default=[1],
        metavar="N[,N...]",
        help="the reports' seed, then seeds every target runs again on to show its failures reproduce "
        "(into <out>/seed-N/); default 1",
    )
    matrix.add_argument("--no-install", action="store_true", help="skip each implementation's 'setup install'")


#: Every subcommand, in the order ``--help`` lists them: its help line and what adds its
#: arguments (None: it takes none). Each is ``retryproof.conformance.commands.<name>.main(args)``.
_SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None] | None]] = {
    "run": ("certify a runtime against the contract and write reports", _run_arguments),
    "list": ("print the scenario catalogue (with --binding: which scenarios apply to a tool)", _list_arguments),
    "validate-report": ("check a report.json against the report schema", _validate_report_arguments),
    "digest": ("print the write-task-v1 digest of a task object", _digest_arguments),
    "selftest": ("run the catalogue against the reference and every bundled faulty runtime", _selftest_arguments),
    "replay": ("re-run a replay file (FUZZ-MODEL, CRASH-POINTS, KILL-NEMESIS) against a harness", _replay_arguments),
    "diff": ("compare two report.json files: regressions, fixes, verdict change", _diff_arguments),
    "merge": ("merge the reports of 'run --shard K/N' runs into the report of the whole run", _merge_arguments),
    "compare": ("implementations side by side, from their report.json files", _compare_arguments),
    "matrix": ("set up, run and compare every bundled implementation (adapters/implementations/)", _matrix_arguments),
}
COMMANDS = tuple(_SUBCOMMANDS)


def _usage() -> str:
    """What ``retryproof`` with no command prints: every command, and the one to start with."""
    width = max(map(len, COMMANDS))
    return "\n".join(
        [
            "usage: retryproof COMMAND [OPTIONS]",
            "",
            "Start with 'retryproof run', which certifies the bundled reference runtime;",
            "add --harness CMD (or --python, or --binding FILE) to certify yours.",
            "",
            "commands:",
            *(f"  {name:<{width}}  {help_line}" for name, (help_line, _) in _SUBCOMMANDS.items()),
            "",
            "A command's options: retryproof COMMAND --help",
        ]
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; given ``command``, the other subcommands are
    listed without their arguments, which that command line never parses: their types
    and defaults come from ``options`` (dataclasses and inspect with it), which
    ``retryproof digest`` would otherwise load for nothing."""
    parser = _Parser(
        prog="retryproof",
        description="Conformance test kit for retry-safe side effects in agent runtimes.",
    )
    parser.add_argument("--version", action="version", version=f"retryproof {__version__}")
    if command is not None:
        parser.helped = f"{parser.prog} {command}"
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # none given: main prints _usage()
    for name, (help_line, add_arguments) in _SUBCOMMANDS.items():
        subparser = sub.add_parser(name, help=help_line)
        if add_arguments is not None and command in (None, name):
            add_arguments(subparser)
    return parser


#: The exit status of a kit crash: an exception no command turned into a verdict or a
#: ``KitError`` (a bug in retryproof, or memory running out). Not 1, which says "not
#: conformant" or "a regression", nor 2, which says the user's input was refused.
CRASH_EXIT_CODE = 3

#: The module that starts and registers every child process group and scratch directory.
_PROCESS_ADAPTER = "retryproof.adapters.process_groups"


class _Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM in a command that started no harness; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum: int, frame: object) -> None:
    """End what the process adapter started and unwind as its ``Interrupted``. A command
    that never loaded the adapter started no harness and no scratch directory (it
    registers every one it starts), so it has nothing to end, and does not load the
    adapter (subprocess, threads, futures) for it, which ``retryproof digest`` did at
    every start. Loading it here, inside a signal handler, could meet a
    module the main thread is half-way through importing."""
    interrupt = getattr(sys.modules.get(_PROCESS_ADAPTER), "interrupt", None)
    if interrupt is not None:
        interrupt(signum, frame)
    raise _Interrupted(signum)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM (how CI cancels a job) end every harness process
    group and remove every scratch directory at once, whatever thread started them,
    then unwind the command as ``Interrupted``: no report of this run is written, so
    the reports of an earlier run in the same directory stay as they were."""
    previous = {signum: signal.signal(signum, _on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    # The first word is the subcommand whenever it names one: the only options before
    # it (--version, --help) take no value.
    args = build_parser(words[0] if words and words[0] in COMMANDS else None).parse_args(words)
    if args.command is None:
        print(_usage(), file=sys.stderr)
        return 2
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
        _complain(args.command, exc.message, exc.hint, exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        end_everything = getattr(sys.modules.get(_PROCESS_ADAPTER), "end_everything", None)
        if end_everything is not None:  # else no harness was started: see _on_signal
            end_everything()
        if not getattr(exc, "reported", False):  # a child retryproof run may have said it (matrix)
            print("interrupted", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    except BrokenPipeError:
        # The reader went away (`retryproof list | head`): stop quietly, and keep the
        # interpreter's final flush from raising again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a crash (RecursionError, MemoryError too): the one place it is reported
        # What it started is ended at exit, by the process adapter's atexit hook.
        import errno  # built in: nothing to load

        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):  # the machine's, not the kit's
            where = f"cannot write {exc.filename}" if exc.filename else "a write failed"
            _complain(args.command, f"{where}: {exc.strerror}", "make room on that file system, then run again", 2)
            return 2
        _complain(
            args.command,
            f"retryproof crashed: {type(exc).__name__}: {exc}"[:2000],
            f"this is a bug in retryproof {__version__} (exit {CRASH_EXIT_CODE}); "
            "please report it with the command line that caused it",
            CRASH_EXIT_CODE,
        )
        return CRASH_EXIT_CODE


#: The commands whose outcome a CI job reads from its step summary.
_SUMMARISED = ("run", "merge")


def _complain(command: str, message: str, hint: str | None, exit_code: int) -> None:
    """An ``error:`` and a ``hint:`` line, each one line whatever it quotes: a message
    naming a value from a report or a harness cannot start a line of its own in a CI
    log (``::error::`` would be a workflow command there). A command that writes a
    step summary says there why it reached no verdict."""
    from retryproof.conformance.writers.escape import one_line

    print(f"error: {one_line(message)}", file=sys.stderr)
    if hint:
        print(f"hint: {one_line(hint)}", file=sys.stderr)
    if command in _SUMMARISED:
        from retryproof.conformance.writers.step_summary import append_failure

        append_failure(command, message, hint, exit_code)


if __name__ == "__main__":
    sys.exit(main())
