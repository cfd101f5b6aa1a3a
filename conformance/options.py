"""The options of a run: declared once (``RUN_OPTIONS``) for ``retryproof run`` and the
pytest plugin to render, with their defaults and the checks that turn user text into
them, and read into one typed object (``Options``).

A leaf: only the standard library and the kit's errors and records are imported at
module level (the pytest plugin reads the table in every session, even one that never
names a runtime), and nothing above it (the runner, the writers) at all: the format
names are data here, and the selection is checked where a run starts.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retryproof.conformance.errors import KitError

if TYPE_CHECKING:
    from retryproof.adapters.binding import Binding
    from retryproof.adapters.targets import Target
    from retryproof.conformance.records import Shard

#: Seconds to wait for one response, and for a harness's handshake.
CALL_TIMEOUT_S = 10.0
START_TIMEOUT_S = 10.0
#: Callers racing on one submission id in the A4 scenarios.
CONCURRENCY = 8
#: The most ``--concurrency`` takes. A4-MULTIPROCESS starts that many harnesses at once,
#: and A4-CONCURRENT pipelines eight times that many calls into one under one call
#: timeout: 256 reference harnesses took 18 s at load 55; 30000 callers never finished,
#: and a SIGTERM took a minute to act. Races show at the default.
MAX_CONCURRENCY = 256
#: The bundled reference runtime: the target when none is named. Its launcher starts it
#: without the ``site`` module (reference_impl/launch.py says why); it sits in
#: ``reference_impl``, beside this package's folder in both an editable and a wheel install.
REFERENCE_COMMAND = (
    sys.executable,
    "-S",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference_impl", "launch.py"),
)
#: How reports, evidence and reproduce hints show it: the command a reader types, which
#: runs the same ``main`` (and names no path of this machine).
REFERENCE_SHOWN = ("python", "-m", "retryproof.reference_impl")


def reference_shown(command: tuple[str, ...]) -> tuple[str, ...] | None:
    """``command`` as reports show it when it starts the bundled reference (a faulty
    variant's ``--fault NAME`` kept), else None (shown as it is)."""
    if command[: len(REFERENCE_COMMAND)] != REFERENCE_COMMAND:
        return None
    return (*REFERENCE_SHOWN, *command[len(REFERENCE_COMMAND) :])


#: The longest timeout accepted, in seconds (a day): longer ones are typing mistakes,
#: and overflow the platform's thread waits.
MAX_TIMEOUT_S = 86400.0
#: The ``--format`` names, in the order messages list them: the names only, so that
#: checking a ``--format`` loads no renderer. ``writers/files.FORMATS`` holds a file and
#: a renderer for each (tests/conformance/test_options.py keeps the two equal).
REPORT_FORMATS = ("json", "md", "junit", "html", "badge", "svg")


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, which a container or
    ``taskset`` narrows), not the CPUs the machine has."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # platforms without affinity masks
        return max(1, os.cpu_count() or 1)


def default_jobs() -> int:
    """The default of ``--jobs``: one more than ``available_cpus()``. A scenario spends
    about two fifths of its time waiting rather than computing (its harness's fsyncs,
    starts and seeded delays: the reference's run at ``--jobs 1`` takes about 6.3 s for
    3.8 CPU-s), and one scenario more keeps the CPUs busy through those waits."""
    return available_cpus() + 1


@dataclass(frozen=True)
class Options:
    command: tuple[str, ...]
    target: str  # the CLI arguments that select this harness, for reproduce lines
    seed: int
    concurrency: int = CONCURRENCY
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    call_timeout: float = CALL_TIMEOUT_S
    start_timeout: float = START_TIMEOUT_S
    baseline: frozenset[str] = field(default_factory=frozenset)
    baseline_file: str | None = None
    #: Scenarios run at once (``--jobs``); only durations depend on it.
    jobs: int = 1
    shard: Shard | None = None
    #: An MCP server or HTTP API reached through a binding file instead of a harness.
    binding: Binding | None = None

    @property
    def way_in(self) -> Target:
        """The ``Target`` every connection of the run is made through."""
        from retryproof.adapters.targets import target_of

        return target_of(self.command, self.binding, reference_shown(self.command))


def _at_least(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value} must be at least {least}")
    return value


def racing_callers(text: str) -> int:
    """``--concurrency``: one caller cannot race, so A4 would pass by construction; more
    than ``MAX_CONCURRENCY`` is a run that does not end."""
    value = _at_least(text, 2)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(
            f"{value} must be at most {MAX_CONCURRENCY}: each caller of A4-MULTIPROCESS is a harness process"
            f" (races show at the default, {CONCURRENCY})"
        )
    return value


def job_count(text: str) -> int:
    """``--jobs``: how many scenarios run at once."""
    return _at_least(text, 1)


def shard_spec(text: str) -> Shard:
    """``--shard K/N``, 1 <= K <= N."""
    from retryproof.conformance.records import Shard  # here: the plugin's import never builds the verdict's records

    index, slash, count = text.partition("/")
    try:
        shard = Shard(int(index), int(count))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not of the form K/N, e.g. 1/4") from None
    if not slash or not 1 <= shard.index <= shard.count:
        raise argparse.ArgumentTypeError(f"{text!r}: K/N needs 1 <= K <= N, e.g. 1/4")
    return shard


def id_list(text: str) -> list[str]:
    """``--skip``: comma-separated ids; a blank value leaves nothing out."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _some(text: str, what: str) -> list[str]:
    """An ``--only`` list, at least one item: a blank value, what an unset CI variable
    gives, must not quietly mean everything."""
    ids = id_list(text)
    if not ids:
        raise argparse.ArgumentTypeError(f"{text!r} names no {what}")
    return ids


def scenario_ids(text: str) -> list[str]:
    """``run --only``: comma-separated scenario ids."""
    return _some(text, "scenario id; see 'retryproof list'")


def implementation_names(text: str) -> list[str]:
    """``matrix --only``: comma-separated folders of adapters/implementations/."""
    return _some(text, "implementation folder of adapters/implementations/")


def seed_list(text: str) -> list[int]:
    """``matrix --seeds``: comma-separated seeds, at least one, none twice (a seed run
    again gives the same choices, so it would show nothing)."""
    seeds = []
    for item in _some(text, "seed"):
        try:
            seeds.append(int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not an integer seed") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} names a seed twice")
    return seeds


def report_formats(text: str) -> list[str]:
    """``--format``: comma-separated report formats, at least one, each known."""
    formats = list(dict.fromkeys(id_list(text)))
    unknown = [fmt for fmt in formats if fmt not in REPORT_FORMATS]
    if unknown or not formats:
        what = f"unknown report format(s) {', '.join(unknown)}" if unknown else f"{text!r} names no report format"
        raise argparse.ArgumentTypeError(f"{what}; choose from {','.join(REPORT_FORMATS)}")
    return formats


def given(text: str) -> str:
    """A value that must say something (``--harness``, ``--python``, ``--out``): an
    empty or blank one is what an unset variable gives, never a choice."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty or blank value; give one, or leave the option out")
    return text


def seconds(text: str) -> float:
    """``--call-timeout``, ``--start-timeout``: a finite number of seconds above zero,
    at most a day. Zero, negative, nan and inf would be blamed on the runtime."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}")
    return value


@dataclass(frozen=True)
class Option:
    """One option of a run, declared once (Schemathesis's ``OptionSpec``): ``retryproof
    run`` renders it as ``--<name>``, the pytest plugin as ``--retryproof-<name>``, each
    with ``parser_arguments``, so the two cannot disagree on a type, a metavar or a help
    line. Both hand ``from_arguments`` the value under ``dest``, ``default`` when left out."""

    name: str  # the flag without its dashes, e.g. ``call-timeout``
    metavar: str
    help: str
    type: Callable[[str], Any] = str
    default: Any = None
    #: Names the runtime (harness, hosted class or binding): at most one is given.
    target: bool = False
    #: Also a pytest option; not ``--format`` (the plugin writes every format) nor
    #: ``--jobs`` (pytest-xdist spreads the scenarios).
    pytest: bool = True

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    def parser_arguments(self) -> dict[str, Any]:
        """The ``add_argument`` keywords both parsers share (pytest's ``addoption``
        takes argparse's)."""
        return {"type": self.type, "metavar": self.metavar, "help": self.help}


#: The options of a run, in the order ``--help`` lists them.
RUN_OPTIONS = (
    Option("harness", "CMD", "run against the harness this command line starts", given, target=True),
    Option(
        "python",
        "MODULE:FACTORY",
        "run against a Python runtime class, hosted in a harness subprocess",
        given,
        target=True,
    ),
    Option(
        "binding",
        "FILE",
        "run against the MCP server or HTTP API a binding file describes (spec/README.md)",
        given,
        target=True,
    ),
    Option("only", "IDS", "comma-separated scenario ids to run", scenario_ids),
    Option("skip", "IDS", "comma-separated scenario ids to leave out", id_list, default=()),
    Option(
        "out",
        "DIR",
        "the report directory (left out: 'retryproof run' writes reports/<implementation name>/, "
        "the pytest plugin writes no files)",
        given,
    ),
    Option(
        "format",
        "FMTS",
        f"comma-separated report formats of {','.join(REPORT_FORMATS)} (default md,json,junit; "
        "the pytest plugin writes them all)",
        report_formats,
        default=["md", "json", "junit"],
        pytest=False,
    ),
    Option("seed", "N", "seed for every random choice (default: random, and printed)", int),
    Option(
        "shard",
        "K/N",
        "run the K-th of N deterministic parts of the selection (CI matrices); join them with 'retryproof merge'",
        shard_spec,
    ),
    Option(
        "concurrency",
        "N",
        f"callers in the A4 scenarios, 2 to {MAX_CONCURRENCY}: one caller cannot race (default {CONCURRENCY})",
        racing_callers,
        default=CONCURRENCY,
    ),
    Option("baseline", "FILE", "expected failures: a listed failure xfails, a listed scenario that passes fails"),
    Option(
        "call-timeout",
        "S",
        f"seconds to wait for one response (default {CALL_TIMEOUT_S:g})",
        seconds,
        default=CALL_TIMEOUT_S,
    ),
    Option(
        "start-timeout",
        "S",
        f"seconds to wait for the handshake (default {START_TIMEOUT_S:g})",
        seconds,
        default=START_TIMEOUT_S,
    ),
    Option(
        "jobs",
        "N",
        "scenarios run at once (default: one more than the CPUs this process may use); reports and verdict do not depend on it",
        job_count,
        default=default_jobs(),
        pytest=False,
    ),
)

#: The options whose values change what a scenario does: a reproduce line names each one
#: off its default, a replay file records them, and ``retryproof replay`` takes them from
#: the file unless its own flag says otherwise.
REPLAYED_OPTIONS = tuple(
    option for option in RUN_OPTIONS if option.dest in ("concurrency", "call_timeout", "start_timeout")
)


def replayed_flags(values: Mapping[str, Any]) -> list[str]:
    """``--NAME VALUE`` for each of ``REPLAYED_OPTIONS`` in ``values`` (by ``dest``), as a
    reproduce line and a replay pass them."""
    return [
        word
        for option in REPLAYED_OPTIONS
        if option.dest in values
        for word in (f"--{option.name}", format(values[option.dest], "g"))
    ]


def harness_target(harness: str | None, python: str | None) -> tuple[tuple[str, ...], str]:
    """The harness command line and the CLI arguments that name it again (neither
    given: the bundled reference runtime)."""
    from retryproof.adapters.python_host import host_command

    if python is not None:
        if ":" not in python:
            raise KitError(
                f"--python {python!r} is not of the form module:factory",
                "for example --python my_runtime.harness:make_runtime",
            )
        return tuple(host_command(python)), f"--python {shlex.quote(python)}"
    if harness is not None:
        try:
            command = tuple(shlex.split(harness))
        except ValueError as exc:
            raise KitError(
                f"cannot parse --harness: {exc}", 'quote the whole command line: --harness "node harness.js"'
            ) from None
        if not command or not command[0].strip():
            raise KitError(
                "--harness is empty", 'give the command line that starts your harness, e.g. --harness "node harness.js"'
            )
        return command, f"--harness {shlex.quote(harness)}"
    return REFERENCE_COMMAND, ""


#: Where the bindings of the bundled reference (``--binding reference-http``) live.
SHIPPED_BINDINGS = "retryproof.adapters"
#: The largest binding file read.
BINDING_MAX_BYTES = 1024 * 1024


def load_binding(path: str) -> Binding:
    """The binding a file describes (a bundled one may be named by its stem, e.g.
    ``reference-http``); every problem is a ``KitError`` naming the file and the key,
    found before any server starts."""
    import os
    from importlib import resources

    import yaml

    from retryproof.adapters.binding import BindingError, parse
    from retryproof.conformance.errors import load_user_file

    shipped = resources.files(SHIPPED_BINDINGS) / "bindings" / f"{path}.yaml"
    if not os.path.exists(path) and shipped.is_file():
        path = str(shipped)
    hint = "see spec/README.md, 'Certifying an MCP server' and 'Certifying an HTTP API'"
    # A binding is a page of YAML; one of many megabytes (a 50 MB name) is a mistake or
    # an attack, and every report would carry it three times.
    document = load_user_file(path, "binding", yaml.safe_load, "YAML", hint, limit=BINDING_MAX_BYTES)
    try:
        return parse(document, path)
    except BindingError as exc:
        raise KitError(f"binding {path}: {exc.key}: {exc.problem}", exc.hint or hint) from None


def unknown_names_hint(unknown: Sequence[str], known: Iterable[str], then: str) -> str:
    """``then``, after a guess at each of ``unknown`` that is close to a ``known`` name:
    a name in the wrong case gets its right spelling suggested, never silently taken."""
    import difflib  # only on this error path

    by_folded = {name.casefold(): name for name in known}
    guesses = {
        name: by_folded[close[0]]
        for name in unknown
        if (close := difflib.get_close_matches(name.casefold(), by_folded, n=1))
    }
    if not guesses:
        return then
    if len(unknown) == 1:
        return f"did you mean {guesses[unknown[0]]}? {then}"
    return f"did you mean {', '.join(f'{guess} for {name}' for name, guess in guesses.items())}? {then}"


def load_baseline(path: str) -> frozenset[str]:
    """The expected-failure ids of a baseline file (``spec verdict.baseline.format``)."""
    import yaml

    from retryproof.conformance.catalogue import catalogue
    from retryproof.conformance.errors import load_user_file

    document = load_user_file(
        path,
        "baseline",
        yaml.safe_load,
        "YAML or JSON",
        "expected a YAML or JSON file: {expected_failures: [SCENARIO-ID, ...]}",
    )
    entries = document.get("expected_failures") if isinstance(document, dict) else None
    if not isinstance(entries, (list, dict)) or not all(isinstance(item, str) for item in entries):
        raise KitError(
            f"baseline {path} has no list of expected_failures", "expected {expected_failures: [SCENARIO-ID, ...]}"
        )
    known = [item.id for item in catalogue()]
    unknown = sorted(set(entries) - set(known))
    if unknown:
        raise KitError(
            f"baseline {path} names unknown scenario id(s): {', '.join(unknown)}",
            unknown_names_hint(unknown, known, "see 'retryproof list'"),
        )
    return frozenset(entries)


def from_arguments(args: Any) -> Options:
    """The options of a run from parsed arguments: those of ``retryproof run``, or the
    pytest plugin's, each under the ``dest`` of its ``RUN_OPTIONS`` entry (``jobs`` only
    from the CLI: under pytest, xdist spreads the scenarios)."""
    import secrets  # here: it loads OpenSSL, which `retryproof list` and the plugin's import never need

    binding_file = getattr(args, "binding", None)
    binding = load_binding(binding_file) if binding_file else None
    command: tuple[str, ...] = ()
    if binding_file:
        target = f"--binding {shlex.quote(binding_file)}"
    else:
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
        jobs=getattr(args, "jobs", 1),
        shard=getattr(args, "shard", None),
        binding=binding,
    )
