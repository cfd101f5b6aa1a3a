"""The engine: run selected catalogue scenarios against one harness, emitting events.

Per scenario: check its needs against the runtime's ``hello``, give it a fresh state
directory and a ``Context``, run it, turn its ending into a status, collect evidence,
end every process it started. The runner never writes a report itself.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from retryproof.adapters.connection import Connection, HarnessStartError
from retryproof.adapters.process_groups import Scratch
from retryproof.adapters.targets import shown
from retryproof.conformance import __version__
from retryproof.conformance.catalogue import Entry, catalogue
from retryproof.conformance.context import (
    CatalogueViolation,
    Context,
    NotApplicable,
    ScenarioFailed,
    Skipped,
    Unjudgeable,
)
from retryproof.conformance.errors import KitError
from retryproof.conformance.events import (
    Event,
    RunFinished,
    RunInfo,
    RunStarted,
    ScenarioFinished,
    ScenarioResult,
    ScenarioStarted,
    Sink,
)
from retryproof.conformance.machine_paths import without_machine_paths
from retryproof.conformance.options import REPLAYED_OPTIONS, Options, replayed_flags, unknown_names_hint
from retryproof.conformance.records import Shard, Status
from retryproof.conformance.scenarios import Scenario, registry
from retryproof.conformance.schedule import SOLO, NoTurn, Turn, in_order
from retryproof.conformance.sharing import Handshake, Lease, SharedServer
from retryproof.conformance.validation import prepare, result_problem
from retryproof.conformance.verdict import judge
from retryproof.spec import SPEC_VERSION, fingerprint
from retryproof.spec.protocol import Hello

if TYPE_CHECKING:
    from retryproof.adapters.binding import Binding

#: The harness stderr kept per failed scenario in reports.
STDERR_EVIDENCE_CHARS = 8000
#: Scenarios a harness may lose to a missed deadline before the rest of the run is not
#: started: a harness that went silent costs a few timeouts, not one per scenario.
SILENT_SCENARIOS_LIMIT = 3


#: Scenarios that run in every shard of a ``--shard`` run, each on its share of a budget.
SPLIT_ACROSS_SHARDS = ("FUZZ-MODEL",)


def select(only: Sequence[str], skip: Sequence[str], shard: Shard | None = None) -> list[Entry]:
    """The catalogue entries to run, in catalogue order; unknown ids are a user error.

    A selection that leaves nothing to run (``--only X --skip X``) is one too.

    A shard K/N takes every N-th of the selected scenarios, starting at the K-th, so
    the N shards of one selection partition it whatever machines they run on; a
    scenario of ``SPLIT_ACROSS_SHARDS`` is in every shard, on a 1/N share of its budget.
    """
    known = {item.id for item in catalogue()}
    unknown = sorted((set(only) | set(skip)) - known)
    if unknown:
        raise KitError(
            f"unknown scenario id(s): {', '.join(unknown)}",
            unknown_names_hint(unknown, known, "see 'retryproof list' for the catalogue"),
        )
    selected = [item for item in catalogue() if (not only or item.id in only) and item.id not in skip]
    if not selected:
        raise KitError("--only and --skip leave no scenario to run", "a scenario named in both is skipped")
    if shard is None:
        return selected
    dealt = [item for item in selected if item.id not in SPLIT_ACROSS_SHARDS]
    mine = {item.id for item in dealt[shard.index - 1 :: shard.count]}
    return [item for item in selected if item.id in mine or item.id in SPLIT_ACROSS_SHARDS]


def probe(options: Options) -> Hello:
    """Start the harness once on a scratch directory for its ``hello``; a harness that
    cannot do that is a reason the kit cannot run (exit 2)."""
    return _handshake(options, keep=False)[0]


def handshake(options: Options) -> tuple[Hello, Handshake | None]:
    """``probe``, keeping the server it started running: ``run`` lends it to the first
    sharing scenario, a start saved, or ends it at once when none will share.

    A binding's ``hello`` is its document's and needs no server, but the handshake
    starts it all the same: a server that cannot start (a wrong command, a missing
    module) is then the run's one typed error with the server's stderr (exit 2), as for
    a harness. Started first by a scenario instead, it was an error per scenario, and
    CRASH-POINTS, whose first start is under strace, read it as strace failing here.
    That costs one start in a run where no scenario shares (``--only CRASH-POINTS``)."""
    return _handshake(options, keep=True)


def _handshake(options: Options, keep: bool) -> tuple[Hello, Handshake | None]:
    target = options.way_in
    scratch = Scratch("retryproof-probe-")
    connection = kept = None
    # The hello's validator is built while the harness starts: both lie on the way to
    # the first scenario, and the harness starts in a process of its own.
    validator = threading.Thread(target=prepare, args=("hello",), name="retryproof-validator", daemon=True)
    validator.start()
    try:
        connection = target.connect(scratch, call_timeout=options.call_timeout, start_timeout=options.start_timeout)
        answered = connection.start()
        validator.join()  # so the schema is built once, not also here
        problem = result_problem("hello", answered)
        if problem:
            raise KitError(
                f"the harness failed its handshake: {problem}",
                "see spec/schemas/harness-response.json ($defs/hello_result)",
            )
        hello = Hello.read(answered)
        kept = Handshake(connection, scratch) if keep else None
    except HarnessStartError as exc:
        stderr = exc.stderr.strip()[-2000:]
        raise KitError(
            f"{target.what} failed its handshake: {exc.message}",
            f"its stderr:\n{stderr}" if stderr else target.start_fix,
        ) from None
    finally:
        if kept is None:
            if connection is not None:
                connection.kill()
            scratch.remove()
        # Also when the start failed, and last, so that an interrupt here skips no cleanup:
        # a daemon thread still importing when the interpreter ends can abort it (exit 134
        # after a handshake error, 2 runs in 280 at load 12).
        validator.join()
    return hello, kept


def run_info(options: Options, hello: Hello) -> RunInfo:
    """What every report says about the run, as it starts."""
    return RunInfo(
        kit_version=__version__,
        spec_version=SPEC_VERSION,
        spec_fingerprint=fingerprint(),
        protocol=options.way_in.protocol,
        implementation=dict(hello.implementation),
        target=options.target,
        capabilities=hello.listed("capabilities"),
        failpoints=hello.listed("failpoints"),
        seed=options.seed,
        concurrency=options.concurrency,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        baseline=options.baseline_file,
        harness_command=harness_command(options.way_in.started),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        platform=platform.platform(),
        only=options.only,
        skip=options.skip,
        shard=options.shard,
        black_box=options.way_in.black_box,
    )


def harness_command(command: Sequence[str]) -> str:
    """The harness command line as a user would type it (``targets.shown``)."""
    return shlex.join(shown(command))


class Marks:
    """How ``schedule.in_order`` starts a run's scenarios: which ask for an alone part,
    how long each is, which take turns on the shared server. They depend on the
    scenarios alone (and on whether the run goes through a binding and shares a
    server), not on the runtime's ``hello``: the selftest orders the scenarios of
    runtimes whose handshakes have not happened yet."""

    def __init__(self, scenarios: Mapping[str, Scenario], through_binding: bool, share: bool = True):
        self.scenarios = scenarios
        self.through_binding = through_binding
        self.share = share

    def alone(self, item: Entry) -> bool:
        bound = self.scenarios.get(item.id)
        return bound is not None and bound.alone

    def long(self, item: Entry) -> int:
        bound = self.scenarios.get(item.id)
        return 0 if bound is None else bound.long

    def shared(self, item: Entry) -> bool:
        """Whether ``item`` takes its turn on the shared server (so never beside another that does)."""
        bound = self.scenarios.get(item.id)
        return self.share and bound is not None and bound.lends(self.through_binding)

    def turn(self, item: Entry) -> int:
        """The rank of a shared ``item``'s turn (``schedule.shared_turns``): first
        those that need a server no other scenario used (``cold_server``: the first
        server, the handshake's, answered no call); last those that restart the server
        (which ends it after their turn, ``sharing.py``), so the server the others used
        goes on to the first of those, not a fresh one after a restart. A binding run of
        every scenario starts two servers fewer than in catalogue order with a server of
        A4-CONCURRENT's own."""
        bound = self.scenarios.get(item.id)
        if bound is None:
            return 1
        return 2 if bound.takes_server else 0 if bound.cold_server else 1


class Run:
    """A run emitting every event to ``sinks``: ``run`` drives it over the selection
    (``compute`` on worker threads, ``record`` in catalogue order), the pytest plugin
    item by item (``scenario``). ``share`` says whether ``shares_server`` scenarios
    take turns on one server (``sharing.py``), whatever the target: through a binding a
    server's start is the vendor's (an MCP SDK's import alone costs more CPU than such a
    scenario's calls); a harness starts in tens of milliseconds, but a run of the
    reference started one for each of its ten such scenarios, a tenth of its starts,
    and under ``--jobs`` a start is CPU the other job waits for (the tests switch it
    off to compare: ``share=False``);
    ``selection``, the entries the run will compute, lets the last turn on it end it
    (``sharing.py``: so its escaped processes are named in that turn's result);
    ``handshake``, the server ``handshake`` left running, is the shared server's
    first (ended here when the run shares none)."""

    def __init__(
        self,
        options: Options,
        hello: Hello,
        sinks: Sequence[Sink],
        total: int,
        began: float | None = None,
        share: bool = True,
        selection: Sequence[Entry] | None = None,
        handshake: Handshake | None = None,
    ):
        self.options = options
        self.hello = hello
        self.sinks = tuple(sinks)
        self.total = total
        self.info = run_info(options, hello)
        self.results: list[ScenarioResult] = []
        self.scenarios = registry()
        self.marks = Marks(self.scenarios, options.binding is not None, share)
        self.began = time.perf_counter() if began is None else began  # a perf_counter reading
        #: The scenarios the harness lost to a missed deadline, (id, that deadline): every
        #: job's as computed, and those recorded, in catalogue order.
        self.silent: list[tuple[str, str]] = []
        self._recorded_silent: list[tuple[str, str]] = []
        #: Each selected scenario's place in catalogue order (unknown without a selection).
        self._position = {entry.id: number for number, entry in enumerate(selection or ())}
        self.shared = None
        if share:
            users = None if selection is None else sum(1 for item in selection if self._lends(item))
            self.shared = SharedServer(
                options.way_in,
                call_timeout=options.call_timeout,
                start_timeout=options.start_timeout,
                users=users,
                handshake=handshake,
            )
        elif handshake is not None:
            handshake.end()
        try:
            self._emit(RunStarted(self.info, total))
        except BaseException:  # a sink that fails here must not leave the shared server running
            self.close()
            raise

    def scenario(self, item: Entry, turn: Turn = SOLO) -> ScenarioResult:
        self._emit(ScenarioStarted(item, len(self.results) + 1, self.total))
        return self._finished(self.compute(item, turn))

    def compute(self, item: Entry, turn: Turn = SOLO) -> ScenarioResult:
        """Run one scenario in ``turn``, emitting nothing: safe on any thread. A scenario
        after ``SILENT_SCENARIOS_LIMIT`` that the harness lost to a missed deadline, in
        catalogue order, is not judged: not run here when those are known already, else
        set aside when it is recorded (``_finished``; also with one job, for a shared turn
        that ran ahead of catalogue order), so ``--jobs N`` reports what ``--jobs 1`` does
        whichever scenarios finished first."""
        place = self._position.get(item.id, len(self._position))
        earlier = [lost for lost in list(self.silent) if self._position.get(lost[0], -1) < place]
        result = self._run_unless_refused(item, turn, earlier)
        if _went_silent(result):
            self.silent.append((item.id, str(result.evidence["missed_deadline"])))
        return result

    def _run_unless_refused(self, item: Entry, turn: Turn, silent: list[tuple[str, str]]) -> ScenarioResult:
        """``run_one``, refused (not run; the reason says "not judged", as a scenario that ran
        ahead of them is set aside with the same words) once ``silent``, the scenarios
        before it the harness lost to a missed deadline, reach ``SILENT_SCENARIOS_LIMIT``."""
        refused = None
        if len(silent) >= SILENT_SCENARIOS_LIMIT:
            refused = (
                f"not judged: the harness stopped answering in {len(silent)} scenarios "
                f"({', '.join(scenario for scenario, _ in silent)}; first: {silent[0][1]})"
            )
        return against_baseline(
            run_one(item, self.scenarios.get(item.id), self.options, self.hello, refused, turn, self.shared),
            self.options.baseline,
        )

    def record(self, result: ScenarioResult) -> ScenarioResult:
        """Emit a scenario computed elsewhere, as ``scenario`` would have: with more
        than one job, ``ScenarioStarted`` comes when its turn in catalogue order comes."""
        self._emit(ScenarioStarted(result.entry, len(self.results) + 1, self.total))
        return self._finished(result)

    def _lends(self, item: Entry) -> bool:
        """Whether ``item`` will take a turn on the shared server (``run_one``: a sharing
        scenario whose needs the runtime meets)."""
        return self.marks.shared(item) and not missing_needs(item, self.hello, self.options.binding)

    def _finished(self, result: ScenarioResult) -> ScenarioResult:
        if len(self._recorded_silent) >= SILENT_SCENARIOS_LIMIT:
            # Not judged, as with one job: it ran beside or ahead of the scenarios before
            # it in catalogue order, which had lost the harness by then (refusing is cheap).
            # What escaped a server it ended is still named.
            ran, result = result, self._run_unless_refused(result.entry, SOLO, self._recorded_silent)
            if "survivors" in ran.evidence and "survivors" not in result.evidence:
                result = replace(result, evidence={**result.evidence, "survivors": ran.evidence["survivors"]})
        elif _went_silent(result):
            self._recorded_silent.append((result.entry.id, str(result.evidence["missed_deadline"])))
        self.results.append(result)
        self._emit(ScenarioFinished(result, len(self.results), self.total))
        return result

    def close(self) -> None:
        """End the shared server; safe to call more than once."""
        if self.shared is not None:
            self.shared.close()

    def finish(self) -> RunFinished:
        self.close()
        finished = RunFinished(
            self.info,
            tuple(self.results),
            judge(self.results, self.options.baseline, self.info.black_box, self.info.capabilities),
            time.perf_counter() - self.began,
        )
        self._emit(finished)
        return finished

    def _emit(self, event: Event) -> None:
        for sink in self.sinks:
            sink.handle(event)


def run(options: Options, hello: Hello, sinks: Sequence[Sink], handshake: Handshake | None = None) -> RunFinished:
    """The selected scenarios on ``options.jobs`` threads, their events in catalogue
    order; ``handshake``'s server (``handshake()``) is the run's first shared one."""
    try:
        entries = select(options.only, options.skip, options.shard)
        session = Run(options, hello, sinks, len(entries), selection=entries, handshake=handshake)
    finally:
        if handshake is not None:
            handshake.end()  # a no-op once the run took it
    marks = session.marks
    try:
        for _, result in in_order(
            entries, session.compute, options.jobs, marks.alone, marks.long, marks.shared, marks.turn
        ):
            session.record(result)
    finally:
        session.close()
    return session.finish()


def _went_silent(result: ScenarioResult) -> bool:
    """Whether the harness lost ``result``'s scenario to a missed deadline."""
    return bool(result.evidence.get("missed_deadline")) and result.status == "error"


def against_baseline(result: ScenarioResult, baseline: frozenset[str]) -> ScenarioResult:
    """A listed scenario that does not pass is marked xfail, one that passes xpass;
    not_applicable is neither (``verdict.baseline`` of the spec)."""
    if result.entry.id in baseline and result.status != "not_applicable":
        return replace(result, baseline="xpass" if result.status == "passed" else "xfail")
    return result


def reproduce_line(options: Options, scenario_id: str, environment: Mapping[str, str] | None = None) -> str:
    """The command that runs ``scenario_id`` again the same way: its seed, every
    behaviour option off its default, the target, and the ``environment`` variables
    the scenario's behaviour depended on."""
    words = [f"{name}={shlex.quote(value)}" for name, value in sorted((environment or {}).items())]
    words += ["retryproof", "run", "--only", scenario_id, "--seed", str(options.seed)]
    if options.shard is not None and scenario_id in SPLIT_ACROSS_SHARDS:
        words += ["--shard", str(options.shard)]  # its seed and budget are the shard's
    words += replayed_flags(
        {o.dest: value for o in REPLAYED_OPTIONS if (value := getattr(options, o.dest)) != o.default}
    )
    if options.target:
        words.append(options.target)
    return " ".join(words)


def run_one(
    item: Entry,
    bound: Scenario | None,
    options: Options,
    hello: Hello,
    refused: str | None = None,
    turn: Turn = SOLO,
    shared: SharedServer | None = None,
) -> ScenarioResult:
    """One scenario's result; ``refused`` makes it ``error`` with that reason, unrun.
    A ``shares_server`` or ``takes_server`` scenario takes its turn on ``shared`` when there is one."""
    began = time.perf_counter()

    def finish(status: Status, reason: str | None, context: Context | None = None, **evidence: Any) -> ScenarioResult:
        stderr = None
        reproduce = reproduce_line(options, item.id, context.reproduce_env if context else None)
        if context is not None:
            context.close()  # first: what the harness left behind is evidence too
            evidence = {**context.evidence, **evidence}
            if isinstance(evidence.get("replay"), dict):
                # A replay re-runs the scenario as this run did: a vendor's slow start
                # (--start-timeout) or short bound (--call-timeout) included.
                behaviour = {option.dest: getattr(options, option.dest) for option in REPLAYED_OPTIONS}
                evidence["replay"] = {**evidence["replay"], "options": behaviour}
            if status in ("failed", "error"):
                stderr = context.stderr_text()[-STDERR_EVIDENCE_CHARS:]
        calls = tuple(event.summary() for event in context.history) if context else ()
        # What the reports quote of the runtime names no path of this machine (the reproduce line is the kit's).
        reason, evidence, calls, stderr = without_machine_paths(
            (reason, evidence, calls, stderr), os.getcwd(), os.path.expanduser("~")
        )
        return ScenarioResult(item, status, reason, time.perf_counter() - began, reproduce, evidence, calls, stderr)

    if refused:
        return finish("error", refused)
    if bound is None:
        return finish("error", "not implemented in this version of the kit")
    missing = missing_needs(item, hello, options.binding)
    if missing:
        return finish("skipped", _not_provided(missing), missing=missing)
    if shared is not None and bound.lends(options.binding is not None):
        lease = shared.lend(item.id, bound.cold_server)
        try:
            result = _run_bound(item, bound, options, hello, turn, finish, (shared, lease))
        finally:
            shared.give_back(lease)
        if result.status != "failed" or not lease.inherits:
            return result
        return _failed_after_others(
            result, lease.earlier, _run_bound(item, bound, options, hello, turn, finish), options
        )
    return _run_bound(item, bound, options, hello, turn, finish)


def _failed_after_others(
    shared: ScenarioResult, earlier: tuple[str, ...], alone: ScenarioResult, options: Options
) -> ScenarioResult:
    """A failure on a server holding earlier scenarios' tasks, judged again on a fresh
    server of its own (``alone``): the verdict must not hang on which scenarios a
    selection (``--only``, ``--shard``, the pytest plugin's) put before it, and its
    reproduce line must reproduce it. Failing alone too, the result is the one alone,
    whose reproduce line needs nothing before it. Passing alone, the failure stands (the
    runtime broke the contract on the state other calls of the contract left, a listing
    that drops tasks past some count, say), said as such, and its reproduce line runs
    the scenarios that used the server before it, in their order, then it."""
    first = {"used_before_by": list(earlier), "reason": shared.reason}
    if "survivors" in shared.evidence:
        # Its turn ended the shared server: what escaped that server is named here or nowhere.
        first["survivors"] = shared.evidence["survivors"]
    if alone.status == "failed":
        return replace(alone, evidence={**alone.evidence, "failed_first_on_shared_server": first})
    names = ", ".join(earlier)
    return replace(
        shared,
        reason=f"{shared.reason} (on a server holding the tasks of {names}; on a fresh server of its own it {alone.status})",
        reproduce=reproduce_line(options, ",".join((*earlier, shared.entry.id))),
        evidence={**shared.evidence, "alone": {"status": alone.status, "reason": alone.reason}},
    )


def _shared_only() -> Connection:
    """A sharing scenario's connector: it never makes a connection of its own (the
    context refuses before it would, ``Context._own_process``)."""
    raise CatalogueViolation("a scenario on the shared server makes no connection of its own")


def _run_bound(
    item: Entry,
    bound: Scenario,
    options: Options,
    hello: Hello,
    turn: Turn,
    finish: Callable[..., ScenarioResult],
    shared: tuple[SharedServer, Lease] | None = None,
) -> ScenarioResult:
    """Run ``bound`` on its own state directory and server, or in its turn on
    ``shared``'s, its ending turned into a result by ``finish``; a turn is settled
    first, so what ending the shared server finds is in the result."""
    scratch = None if shared else Scratch(f"retryproof-{item.id.lower()}-")
    connect = (
        options.way_in.connector(scratch, call_timeout=options.call_timeout, start_timeout=options.start_timeout)
        if scratch
        else _shared_only
    )

    def ended(status: Status, reason: str | None, context: Context, **evidence: Any) -> ScenarioResult:
        if shared is not None:
            shared[0].settle(shared[1], status)
        return finish(status, reason, context, **evidence)

    context = Context(
        item,
        connect,
        hello,
        options.seed,
        options.concurrency,
        options.call_timeout,
        options.shard,
        turn if bound.alone else None,
        shared,
        bound.takes_server,
    )
    try:
        bound.run(context)
        return ended("passed", None, context)
    except ScenarioFailed as exc:
        _collect_after_failure(context)
        return ended("failed", str(exc), context)
    except NotApplicable as exc:
        return ended("not_applicable", str(exc), context)
    except Skipped as exc:
        return ended("skipped", str(exc), context)
    except (Unjudgeable, NoTurn) as exc:  # NoTurn: its alone part did not come in time
        return ended("error", str(exc), context)
    except Exception as exc:  # a bug in a scenario must cost that scenario, not the run
        return ended(
            "error", f"kit error: {type(exc).__name__}: {exc}", context, traceback=traceback.format_exc(limit=8)
        )
    finally:
        context.close()
        if scratch is not None:
            scratch.remove()


def missing_needs(item: Entry, hello: Hello, binding: Binding | None) -> list[str]:
    """The needs of ``item`` the runtime does not meet (``capability``,
    ``failpoint:NAME``, ``protocol:PART``, ...); empty when the scenario can run."""
    missing = [need for need in item.capabilities if need not in hello.capabilities]
    missing += [f"failpoint:{name}" for name in item.failpoints if name not in hello.failpoints]
    if "tamper" in hello.capabilities:  # else the tamper capability is missing already
        missing += [f"tamper:{action}" for action in item.tamper_actions if not hello.performs(action)]
    missing += [f"tool:{tool}" for tool in item.tools if shutil.which(tool) is None]
    if binding is not None:  # a harness speaks every part of the protocol
        offered = binding.protocol_parts
        missing += [f"protocol:{part}" for part in item.protocol_parts if part not in offered]
    return missing


def _not_provided(missing: list[str]) -> str:
    """Why a scenario is skipped, blaming each need on whoever lacks it: a program the kit
    needs (``tool:strace``) is this machine's to install, never the runtime's to provide."""
    tools = [need.partition(":")[2] for need in missing if need.startswith("tool:")]
    runtime = [need for need in missing if not need.startswith("tool:")]
    reasons = ["the runtime does not provide " + ", ".join(runtime)] if runtime else []
    if tools:
        names = ", ".join(tools)
        reasons.append(f"this machine has no {names} on PATH, which the kit needs here (install {names})")
    return "; ".join(reasons)


def _collect_after_failure(context: Context) -> None:
    """What durable state looked like when the scenario failed, for the reviewer."""
    if not context.connections or not context.conn.alive:
        return
    try:
        context.tasks("at failure")
        for submission_id in context.submission_ids:
            context.receipt(submission_id, f"{submission_id} at failure")
    except (ScenarioFailed, Unjudgeable):
        pass  # evidence gathering must not replace the failure being reported
