"""The pytest plugin: the scenario catalogue as items of a team's own pytest suite.

``pytest --retryproof-harness "node harness.js"`` adds one item per selected catalogue
scenario, ``retryproof::<SCENARIO-ID>``, after the suite's own tests; no test file is
needed. Each item runs its scenario through the runner, exactly as ``retryproof run``
does, and maps the status onto a pytest outcome (see the README, "pytest plugin").

pytest loads this module through the ``pytest11`` entry point in every session of an
environment where retryproof is installed, so it is inert unless a target option is
given: it then only declares its options. The runner, the scenarios and the writers are
imported, the harness started and items added only once a target is named.

Under pytest-xdist (``-n N``) the scenarios spread over the workers like any items. The
controller picks the seed and hands it to every worker; each worker shakes hands with
the harness itself and sends each scenario's result with its test report; only the
controller writes the reports and the verdict section, from all the results, in
catalogue order, as one run. The workers take turns (``schedule.Turns``) so that the
part of a scenario that runs alone under ``retryproof run --jobs N`` runs alone under
xdist too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from retryproof.conformance.errors import KitError

# A leaf of the standard library and the kit's errors: the plugin's import cost in a
# session that never names a target.
from retryproof.conformance.options import RUN_OPTIONS, Option

if TYPE_CHECKING:
    from retryproof.conformance.catalogue import Entry
    from retryproof.conformance.events import RunFinished, ScenarioResult, Sink
    from retryproof.conformance.options import Options
    from retryproof.conformance.runner import Run
    from retryproof.conformance.schedule import Turns
    from retryproof.conformance.writers.files import DirectoryClaim, ReplayFileWriter, ReportFileWriter

#: The options of a run the plugin takes, each as ``--retryproof-<name>``.
OPTIONS = tuple(option for option in RUN_OPTIONS if option.pytest)
#: ``--retryproof``: the plugin's own switch, the bundled reference runtime as the target.
REFERENCE = "retryproof"
#: The evidence shown in a failure message, per entry; the whole of it is in the reports.
EVIDENCE_CHARS = 300
STDERR_LINES = 15

STATE = pytest.StashKey["RetryproofRun"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("retryproof", "retryproof: the conformance catalogue as pytest items")
    group.addoption(
        f"--{REFERENCE}", action="store_true", help="run the catalogue against the bundled reference runtime"
    )
    for option in OPTIONS:  # no defaults here: a setting given without a target is noticed
        group.addoption(_flag(option), **option.parser_arguments())


def _dest(option: Option) -> str:
    return f"{REFERENCE}_{option.dest}"


def _flag(option: Option) -> str:
    return f"--{REFERENCE}-{option.name}"


def pytest_configure(config: pytest.Config) -> None:
    # `is not None`: an empty --retryproof-harness still names (no) runtime, never none.
    targets = [f"--{REFERENCE}"] if config.getoption(REFERENCE) else []
    targets += [_flag(option) for option in OPTIONS if option.target and config.getoption(_dest(option)) is not None]
    if not targets:
        stray = [_flag(option) for option in OPTIONS if config.getoption(_dest(option)) is not None]
        if stray:
            named = [f"--{REFERENCE}", *(f"{_flag(option)} {option.metavar}" for option in OPTIONS if option.target)]
            raise pytest.UsageError(
                f"retryproof: {', '.join(stray)} given without a runtime; add {', '.join(named[:-1])} or {named[-1]}"
            )
        return
    if len(targets) > 1:
        raise pytest.UsageError(f"retryproof: {' and '.join(targets)} name two runtimes; give one")
    with _usage_errors():
        config.stash[STATE] = run = RetryproofRun.configure(config)
    config.pluginmanager.register(run, "retryproof-run")
    _end_harnesses_on_sigterm(config)
    config.addinivalue_line("markers", "retryproof: a scenario of the retryproof conformance catalogue")
    config.addinivalue_line("markers", "retryproof_must: a retryproof scenario of level MUST (decides the verdict)")
    config.addinivalue_line(
        "markers", "retryproof_should: a retryproof scenario of level SHOULD (only warns in the verdict)"
    )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist, on the controller: every worker runs under the controller's seed,
    and takes its turns through lock files in one directory the controller makes."""
    run = node.config.stash.get(STATE, None)
    if run is None:
        return
    if run.turns_dir is None:
        import shutil
        import tempfile

        run.turns_dir = tempfile.mkdtemp(prefix="retryproof-turns-")
        node.config.add_cleanup(lambda: shutil.rmtree(run.turns_dir, ignore_errors=True))
    node.workerinput["retryproof_seed"] = run.options.seed
    node.workerinput["retryproof_turns"] = run.turns_dir


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """On an xdist worker, the scenario's result travels to the controller with the
    item's report (as its report.json entry: plain data the wire can carry)."""
    outcome = yield
    if isinstance(item, ScenarioItem) and call.when == "call" and item.result is not None and _is_worker(item.config):
        from retryproof.conformance.writers.document import scenario_document

        session = item.config.stash[STATE].session  # set: the item ran a scenario through it
        report = outcome.get_result()
        report.retryproof = {
            "hello": dict(session.hello.result) if session else {},
            "result": scenario_document(item.result),
        }


def _end_harnesses_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (how CI cancels a job) would otherwise end pytest on the spot, leaving the
    harness process groups and scratch directories behind. Installed only where nobody
    else handles SIGTERM, and put back when the session ends; pytest then reports the
    session as interrupted, as for Ctrl-C."""
    import signal

    from retryproof.adapters.process_groups import interrupt

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, interrupt)
        config.add_cleanup(restore)


def pytest_report_header(config: pytest.Config) -> list[str]:
    run = config.stash.get(STATE, None)
    if run is None:
        return []
    target = run.options.target or "the bundled reference runtime"
    shard = f", shard {run.options.shard}" if run.options.shard else ""
    return [f"retryproof: seed {run.options.seed}{shard}, target {target}"]


@pytest.hookimpl(tryfirst=True)  # before -k, -m and --deselect, so they select among the scenarios too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    run = config.stash.get(STATE, None)
    if run is not None:
        # genitems reports the collection, so "collected N items" and --co count the scenarios.
        items.extend(
            session.genitems(Catalogue.from_parent(session, name="retryproof", nodeid="retryproof", path=spec_file()))
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Shake hands with the harness once per session, before the first scenario, and
    only when a scenario is left to run (not for ``--collect-only``, nor when ``-k``
    deselected them all)."""
    run = session.config.stash.get(STATE, None)
    if run is None or session.config.option.collectonly:
        return
    total = sum(isinstance(item, ScenarioItem) for item in session.items)
    if total:
        with _usage_errors():
            run.start(total)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = session.config.stash.get(STATE, None)
    # An interrupted session judges nothing and writes no report: an earlier run's stay.
    if run is None or exitstatus == pytest.ExitCode.INTERRUPTED:
        return
    if run.carried and not _is_worker(session.config):
        run.finish_from_workers()
    else:
        run.finish()


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    run = config.stash.get(STATE, None)
    if run is None or run.finished is None:
        return
    from retryproof.conformance.writers.console import ConsoleWriter

    # The verdict as `retryproof run` words it; pytest's own exit status follows its rules.
    text = io.StringIO()
    ConsoleWriter(text).handle(run.finished)
    terminalreporter.section("retryproof verdict")
    terminalreporter.write(text.getvalue())
    for path in run.written:
        terminalreporter.write_line(f"wrote {path}")


class Catalogue(pytest.Collector):
    """The parent of the scenario items: ``retryproof::<ID>``, located in the spec."""

    def collect(self) -> list[ScenarioItem]:
        run = self.config.stash[STATE]
        lines = _declarations(self.path)
        return [
            ScenarioItem.from_parent(self, name=entry.id, entry=entry, line=lines.get(entry.id, 0))
            for entry in run.entries
        ]


def spec_file() -> Path:
    return Path(str(resources.files("retryproof.spec").joinpath("retryproof.yaml")))


def _declarations(path: Path) -> dict[str, int]:
    """The 0-based line of each ``- id: <ID>`` in the spec, so a skip or failure points
    at the scenario's declaration rather than into this plugin."""
    lines: dict[str, int] = {}
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines()):
        match = re.match(r"\s*- id: (\S+)\s*$", text)
        if match:
            lines.setdefault(match.group(1), number)
    return lines


class ScenarioItem(pytest.Item):
    """One catalogue scenario: runs it when pytest runs the item, and turns its status
    into the pytest outcome."""

    def __init__(self, *, entry: Entry, line: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.entry = entry
        self.line = line
        self.result: ScenarioResult | None = None
        self.refused: str | None = None  # under xdist: why it did not get its turn, so it is not run
        self.add_marker("retryproof")
        self.add_marker(f"retryproof_{entry.level.lower()}")
        self.user_properties.append(("retryproof_level", entry.level))

    def runtest(self) -> None:
        run = self.config.stash[STATE]
        result = self.result = run.scenario(self.entry, self.refused)
        self.user_properties += [("retryproof_status", result.status), ("retryproof_reproduce", result.reproduce)]
        conclude(result, run.options.baseline_file, black_box=run.options.binding is not None)

    def reportinfo(self):
        return self.path, self.line, f"retryproof::{self.entry.id} ({self.entry.level}): {self.entry.title}"


def conclude(result: ScenarioResult, baseline_file: str | None, black_box: bool = False) -> None:
    """The pytest outcome of a scenario result: return for a pass, otherwise raise skip,
    xfail or fail. Nothing that did not run passes. ``black_box``: the runtime is a
    server reached through a binding, so its stderr is the server's."""
    from retryproof.conformance.verdict import applies
    from retryproof.conformance.writers.escape import one_line

    scenario = result.entry.id
    reason = one_line(result.reason or "")
    if result.baseline == "xpass":
        pytest.fail(
            f"[XPASS(strict)] {scenario} passed but is listed in the baseline {baseline_file}: the entry is stale; remove it",
            pytrace=False,
        )
    if result.status == "passed":
        return
    if result.status == "not_applicable":
        _skip(f"not applicable: {reason}")
    if result.status == "skipped":
        blocks = result.entry.level == "MUST" and applies(result)
        _skip(f"not verified, so not conformant: {reason}" if blocks else reason)
    if result.baseline == "xfail":
        pytest.xfail(f"listed in the baseline {baseline_file}: {result.status}: {reason}")
    pytest.fail(failure_message(result, black_box), pytrace=False)


def _skip(reason: str) -> None:
    # Located at the item (its declaration in the spec), as pytest locates a skip mark.
    raise pytest.skip.Exception(reason, _use_item_location=True)


def failure_message(result: ScenarioResult, black_box: bool = False) -> str:
    """A failed or error scenario as a reviewer needs it in a CI log: what broke, the
    key evidence, the harness's (or bound server's) stderr and the command that reproduces it. The first line
    is what pytest's short summary shows."""
    from retryproof.conformance.writers.escape import one_line

    entry = result.entry
    what = "failed" if result.status == "failed" else "error (the kit could not judge)"
    lines = [
        f"{entry.id} {what}: {one_line(result.reason or '')}",
        f"level {entry.level}; checks {', '.join(entry.checks)}",
    ]
    if result.evidence:
        lines.append("evidence:")
        lines += [
            f"  {one_line(key)}: {one_line(_compact(value), EVIDENCE_CHARS)}" for key, value in result.evidence.items()
        ]
    stderr = (result.stderr or "").strip().splitlines()
    if stderr:
        source = "server" if black_box else "harness"
        lines.append(f"{source} stderr (last {min(len(stderr), STDERR_LINES)} lines):")
        lines += [f"  {one_line(line)}" for line in stderr[-STDERR_LINES:]]
    lines.append(f"reproduce: {result.reproduce}")
    return "\n".join(lines)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(eq=False)  # registered as a plugin: pluggy keeps plugins in sets
class RetryproofRun:
    """One pytest session's run of the catalogue: the options, the kit's report files,
    and the runner's ``Run``, which each item advances by one scenario and which feeds
    those files the same events a ``retryproof run`` does."""

    options: Options
    entries: tuple[Entry, ...]  # the selected catalogue entries, in catalogue order
    reports: list[ReportFileWriter]
    replays: ReplayFileWriter | None
    session: Run | None = None  # the runner's run, once the handshake is done
    finished: RunFinished | None = None
    began: float = field(default_factory=time.perf_counter)  # the session's start, for the run's duration
    carried: list[dict[str, Any]] = field(default_factory=list)  # xdist controller: hello and result per scenario
    claim: DirectoryClaim | None = None  # the report directory, while the session writes there
    turns_dir: str | None = None  # xdist controller: where the workers' lock files live
    turns: Turns | None = None  # xdist worker: how it takes turns with the others
    held: contextlib.ExitStack | None = None  # xdist worker: the running item's turn

    @classmethod
    def configure(cls, config: pytest.Config) -> RetryproofRun:
        """Everything that can be checked without starting the harness: the target, the
        scenario ids, the baseline file. A ``KitError`` here is a usage error."""
        from retryproof.conformance.options import from_arguments
        from retryproof.conformance.runner import select
        from retryproof.conformance.writers.files import (
            FORMATS,
            ReplayFileWriter,
            ReportFileWriter,
            prepare_directory,
        )

        given = {option.dest: config.getoption(_dest(option)) for option in OPTIONS}
        if _is_worker(config):  # the controller's seed, even one it drew at random
            given["seed"] = config.workerinput["retryproof_seed"]  # type: ignore[attr-defined]
        arguments = argparse.Namespace(
            **{option.dest: option.default if given[option.dest] is None else given[option.dest] for option in OPTIONS}
        )
        options = from_arguments(arguments)
        entries = tuple(select(options.only, options.skip, options.shard))
        if _is_worker(config):  # under xdist the controller writes the reports
            from retryproof.conformance.schedule import Turns

            turns = Turns(config.workerinput["retryproof_turns"])  # type: ignore[attr-defined]
            return cls(options, entries, [], None, turns=turns)
        if not arguments.out:
            return cls(options, entries, [], None)
        claim = prepare_directory(arguments.out)  # held for the session: no second run writes there meanwhile
        return cls(
            options,
            entries,
            [ReportFileWriter(arguments.out, fmt) for fmt in FORMATS],
            ReplayFileWriter(arguments.out),
            claim=claim,
        )

    @property
    def written(self) -> list[str]:
        if self.finished is None or self.replays is None:
            return []
        return [writer.path for writer in self.reports] + self.replays.paths

    @property
    def sinks(self) -> list[Sink]:
        """The kit's report files, fed the run's events (none on an xdist worker)."""
        return [*self.reports, *([self.replays] if self.replays else [])]

    def start(self, total: int) -> None:
        from retryproof.conformance.runner import Run, probe
        from retryproof.conformance.schedule import NoTurn

        try:  # a harness start, like any other work, waits while a scenario's alone part runs
            with self.turns.take() if self.turns else contextlib.ExitStack():
                hello = probe(self.options)
        except NoTurn as exc:
            raise KitError(f"no handshake: {exc}", "see the README, 'pytest-xdist'") from None
        self.session = Run(self.options, hello, self.sinks, total)

    def scenario(self, entry: Entry, refused: str | None = None) -> ScenarioResult:
        """The scenario's result; ``refused``: an ``error`` with that reason, not run."""
        from retryproof.conformance.runner import against_baseline, run_one
        from retryproof.conformance.schedule import SOLO

        if self.session is None:
            raise RuntimeError("a scenario ran before the handshake")
        if refused:
            result = run_one(entry, None, self.options, self.session.hello, f"not run: {refused}")
            return self.session.record(against_baseline(result, self.options.baseline))
        return self.session.scenario(entry, self.turns or SOLO)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Under xdist, every item of the session, the team's own tests too, runs in its
        turn, from before its setup to after its teardown, so that a scenario's alone
        part has the machine to itself, as under ``retryproof run --jobs N``."""
        if self.turns is None or self.session is None:  # no scenario runs in this worker's session
            return
        from retryproof.conformance.schedule import NoTurn

        try:
            self.held = self.turns.take()
        except NoTurn as exc:
            if not isinstance(item, ScenarioItem):
                pytest.fail(f"retryproof: {exc}", pytrace=False)
            item.refused = str(exc)  # an error in the report, not a gap in it

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        try:
            return (yield)
        finally:
            if self.held is not None:
                self.held.close()
                self.held = None

    def finish(self) -> None:
        """The verdict over the scenarios that ran (none ran: nothing to report)."""
        if self.session is not None and self.session.results:
            self.finished = self.session.finish()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """On the xdist controller (this object is registered as a plugin), collect
        what the workers' reports carry."""
        carried = getattr(report, "retryproof", None)
        if carried is not None and report.when == "call":
            self.carried.append(carried)

    def finish_from_workers(self) -> None:
        """The xdist controller's run: the workers' results in catalogue order, through
        the same ``Run`` (and so the same report files and verdict) as one process."""
        from retryproof.conformance.runner import Run
        from retryproof.conformance.writers.document import scenario_result
        from retryproof.spec.protocol import Hello

        by_id = {item["result"]["id"]: scenario_result(item["result"]) for item in self.carried}
        results = [by_id[entry.id] for entry in self.entries if entry.id in by_id]
        self.session = Run(
            self.options, Hello.read(self.carried[0]["hello"]), self.sinks, len(results), began=self.began
        )
        for result in results:
            self.session.record(result)
        self.finished = self.session.finish()


@contextlib.contextmanager
def _usage_errors() -> Iterator[None]:
    """The kit's user errors as pytest usage errors: ``ERROR: retryproof: ...`` with
    the hint, exit status 4, no traceback."""
    try:
        yield
    except KitError as exc:
        hint = f"\nhint: {exc.hint}" if exc.hint else ""
        raise pytest.UsageError(f"retryproof: {exc.message}{hint}") from None


def _is_worker(config: pytest.Config) -> bool:
    """Whether this session is a pytest-xdist worker."""
    return hasattr(config, "workerinput")
