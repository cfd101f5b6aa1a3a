"""A shared server (``conformance/sharing.py``) is a speed-up, never a way to pass: the
same runtimes fail the same scenarios with sharing as without, each scenario's calls
and counts are its own, a failure ends the server it used, and a scenario that would
need its own process is refused as a kit bug.

The runtimes are the reference and its one-defect variants served as an HTTP API
through a binding (the cheapest server to start), run in this process through the
runner's API, which lets a test switch sharing off (``Run(share=False)``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from kit import REFERENCE, STDLIB_PYTHON, by_id, certify, once_per_session, retryproof_here
from reference_whole import WholeRun

from retryproof.conformance.cli import build_parser
from retryproof.conformance.context import CatalogueViolation, Context
from retryproof.conformance.events import ScenarioResult
from retryproof.conformance.options import Options, from_arguments
from retryproof.conformance.runner import Run, handshake, probe, run, select
from retryproof.conformance.scenarios import registry
from retryproof.conformance.schedule import in_order
from retryproof.conformance.sharing import Handshake, SharedServer
from retryproof.reference_impl.faulty import killed_by
from retryproof.spec.protocol import Hello

#: Every scenario that takes a turn on the shared server in a binding run and does
#: not restart it (LEGACY-NO-ID too, though its tasks carry no key: its turn holds the
#: server alone), but INVALID-KEY (the last, below) and A4-CONCURRENT, whose races must
#: meet a cold server: its turn is the first (``cold_server``).
SHARING = (
    "WT-CREATE",
    "REUSE-EARLIER-ID",
    "CONFLICT-DIGEST",
    "NORMALIZED-EQUAL",
    "DISTINCT-IDS-DISTINCT-TASKS",
    "LEGACY-NO-ID",
)
#: The turns of a run of ``SELECTION``, in their order.
TURNS = ("A4-CONCURRENT", *SHARING, "INVALID-KEY")
SELECTION = TURNS
#: Variants a sharing scenario must fail (their killed_by names one): no-idempotency's
#: A4-CONCURRENT on the cold first turn, then every scenario that retries a key, each
#: failure ending its server; unlocked-check-then-create's race, which A4-CONCURRENT meets
#: on the handshake's server as on one of its own, cold then warm; fuzzy-subject-dedup's DISTINCT-IDS-DISTINCT-TASKS and the failures its dedup
#: across keys makes on inherited state. digest-ignored, digest-without-nfc and
#: reuse-answers-newest run with the harness (``HARNESS_VARIANTS``), the same scenarios
#: on the same shared server and judging: here their runs repeated these ones' shape
#: (a failure on the inherited server, judged again alone; the next turn on a fresh one).
VARIANTS = ("no-idempotency", "unlocked-check-then-create", "fuzzy-subject-dedup")
#: Of those, the one whose defect lies in racing calls on one key, which only
#: A4-CONCURRENT makes here: every other turn sees what it sees of the reference, whose
#: shared run passes them all, so its shared run must fail exactly its killers and pass
#: the rest (run alone as well, they showed only that they pass alone, as with
#: ``ONE_CALL_DEFECTS``).
ONE_KEY_RACE = "unlocked-check-then-create"


def binding_options(
    tmp_path: Path, fault: str | None, only: tuple[str, ...] = SELECTION, escape: bool = False
) -> Options:
    """A run of ``only`` against the reference (or its variant ``fault``) as an HTTP API;
    ``escape``: each server's start leaves a setsid process holding its output, ``sleep
    120``, whose pid it appends to ``tmp_path / "escaped"``."""
    command = ["{python}", *REFERENCE[1:], *(["--fault", fault] if fault else []), "--http"]
    if escape:
        log = shlex.quote(str(tmp_path / "escaped"))
        escaping = f"(setsid sh -c 'echo $$ >> {log}; exec sleep 120' &); exec {' '.join(command)}"
        command = ["bash", "-c", escaping]
    document = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "adapters" / "bindings" / "reference-http.yaml").read_text()
    )
    document["start"]["command"] = command
    path = tmp_path / f"{fault or 'reference'}.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    args = build_parser("run").parse_args(
        ["run", "--binding", str(path), "--seed", "3", "--jobs", "1", "--start-timeout", "60", "--only", ",".join(only)]
    )
    return from_arguments(args)


def cold_turn_to_its_killers(fault: str, selection: tuple[str, ...]) -> tuple[str, ...]:
    """``selection`` without A4-CONCURRENT unless ``fault`` must fail it. Its turn is the
    first, on a server no call reached (``cold_server``), so it is judged as on a server
    of its own whatever the variant: with one it does not kill, its 200 calls showed only
    what the variant does there. The reference's runs show its turn on the handshake's
    server; its killers' runs, a failure there that ends it."""
    return tuple(
        scenario_id for scenario_id in selection if scenario_id != "A4-CONCURRENT" or scenario_id in killed_by(fault)
    )


@pytest.fixture(scope="module")
def reference_hello(tmp_path_factory: pytest.TempPathFactory) -> Hello:
    """The reference's hello as an HTTP API (a binding's hello is its document's, the
    same for every variant served by it), from one probe a session, for the tests that
    need a hello beside servers of their own (a probe each was a server start each)."""
    return once_per_session(tmp_path_factory, "sharing-hello", lambda path: probe(binding_options(path, None)))


def shared_and_alone(
    options: Options, leave_out: tuple[str, ...] = (), every_turn: bool = False
) -> tuple[dict[str, ScenarioResult], dict[str, ScenarioResult]]:
    """Each selected scenario's result, one after another, sharing and then not
    (``leave_out``'s not, nor a shared failure the runner ran alone: ``judged_alone``,
    nor, unless ``every_turn``, a turn on a fresh server: ``on_a_fresh_server``;
    ``judged_as_alone`` compares them), both under one hello: as in ``run``, the server the
    handshake started is the shared run's first (a probe of its own was one more
    server start per call), and its hello is the same for both runs."""
    hello, kept = handshake(options)

    def each(share: bool, left_out: tuple[str, ...], first: Handshake | None) -> dict[str, ScenarioResult]:
        entries = [entry for entry in select(options.only, options.skip) if entry.id not in left_out]
        session = Run(options, hello, [], len(entries), share=share, handshake=first)
        marks = session.marks
        try:  # one job, in the order of the run's turns (``run``)
            computed = in_order(entries, session.compute, 1, shared=marks.shared, turn=marks.turn)
            return {item.id: session.record(result) for item, result in computed}
        finally:
            session.close()

    shared = each(True, (), kept)
    # A failure on a server earlier turns used was run again alone by the runner itself;
    # a turn on a fresh server was a run alone: running either again repeated it.
    judged = tuple(
        scenario_id
        for scenario_id, result in shared.items()
        if judged_alone(result) or (not every_turn and on_a_fresh_server(result))
    )
    return shared, each(False, (*leave_out, *judged), None)


def judged_alone(result: ScenarioResult) -> str | None:
    """The status the runner's own run of a shared failure on a server of its own gave:
    ``result`` is that run's (``failed_first_on_shared_server``) or says it (``alone``)."""
    if "failed_first_on_shared_server" in result.evidence:
        return result.status
    return result.evidence.get("alone", {}).get("status")


def on_a_fresh_server(result: ScenarioResult) -> bool:
    """Whether the scenario's shared turn was the first on its server, so judged as on a
    server of its own (it made the check that the first listing is empty): not the kit's
    word alone, its first listing is read here too (a failure that handed its server on,
    as if fresh, shows there)."""
    used = result.evidence.get("shared_server")
    if used is None or used["used_before_by"]:
        return False
    listed = result.evidence.get("tasks", {}).get("before", {}).get("count")
    assert listed == 0, (result.entry.id, used, listed, result.reason)
    return True


def judged_as_alone(shared: dict[str, ScenarioResult], alone: dict[str, ScenarioResult]) -> dict[str, str]:
    """Each scenario's status alone (``alone``'s run, the runner's run alone of a shared
    failure, or its turn on a fresh server), checked equal to its status shared (a
    failure first on the shared server, whose result is the run alone, failed there)."""
    found = (
        {
            scenario_id: result.status
            for scenario_id, result in shared.items()
            if scenario_id not in alone and on_a_fresh_server(result)
        }
        | statuses(alone)
        | {scenario_id: status for scenario_id, result in shared.items() if (status := judged_alone(result))}
    )
    first = {
        scenario_id: "failed" if "failed_first_on_shared_server" in result.evidence else result.status
        for scenario_id, result in shared.items()
        if scenario_id in found
    }
    assert first == found
    return found


def statuses(found: dict[str, ScenarioResult]) -> dict[str, str]:
    return {scenario_id: result.status for scenario_id, result in found.items()}


def test_a_takes_server_scenario_takes_its_turn_only_through_a_binding():
    bound = registry()
    # A takes_server scenario's turn is on the shared server only through a binding.
    assert bound["RESTART-REUSE"].lends(through_binding=True)
    assert not bound["RESTART-REUSE"].lends(through_binding=False)
    assert all(bound[scenario_id].shares_server for scenario_id in TURNS)
    assert bound["A4-CONCURRENT"].cold_server  # its rounds meet a cold, then a warm server
    assert not any(bound[scenario_id].cold_server for scenario_id in (*SHARING, "INVALID-KEY"))


@pytest.fixture(scope="module")
def reference_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, ScenarioResult], dict[str, ScenarioResult]]:
    """The reference's sharing turns and then its takers through a binding, shared and
    alone (of the takers, those whose restarts are compared; of the turns, all but the
    first, A4-CONCURRENT's, on the handshake's server, which answered no call: its run
    alone, compared in the cold server's test), from one run each a session: the
    reference's test and the takers' read them."""
    left_out = ("A4-CONCURRENT", *(set(TAKING) - set(COMPARED_RESTARTS)))
    return once_per_session(
        tmp_path_factory,
        "sharing-reference-runs",
        lambda path: shared_and_alone(binding_options(path, None, (*TURNS, *TAKING)), left_out, every_turn=True),
    )


def test_the_reference_passes_with_the_same_calls_and_counts_as_alone(reference_runs):
    shared, alone = reference_runs
    assert statuses(shared) == dict.fromkeys((*TURNS, *TAKING), "passed")
    assert on_a_fresh_server(shared["A4-CONCURRENT"])  # the first turn: its run alone
    inherited = TURNS[1:]
    assert statuses(alone) == dict.fromkeys((*inherited, *COMPARED_RESTARTS), "passed")
    used = [shared[scenario_id].evidence["shared_server"] for scenario_id in TURNS]
    assert {item["server"] for item in used} == {1}, used  # one server for all of them: the handshake's
    assert used[0]["started_by_handshake"] and not any(item["started_by_this_scenario"] for item in used)
    assert used[0]["used_before_by"] == [] and used[-1]["used_before_by"] == list(TURNS[:-1])
    for scenario_id in inherited:
        same_calls_and_counts(shared[scenario_id], alone[scenario_id])
    # The state the later scenarios inherit is the earlier ones' tasks, and nothing else.
    first_listing = shared["INVALID-KEY"].evidence["tasks"]["before"]["count"]
    assert first_listing == sum(_last_listing(alone.get(item) or shared[item]) for item in TURNS[:-1])


def same_calls_and_counts(mine: ScenarioResult, own: ScenarioResult) -> None:
    """Its own calls (same ops, same keys), its own new tasks, its own exchanges."""
    scenario_id = mine.entry.id
    assert _calls(mine) == _calls(own), scenario_id
    assert mine.evidence["set_check"] == own.evidence["set_check"], scenario_id
    assert len(mine.evidence["exchanges"]) == len(own.evidence["exchanges"]), scenario_id


def _last_listing(result: ScenarioResult) -> int:
    """How many tasks the scenario's last listing held (on its own server: all it made)."""
    return list(result.evidence["tasks"].values())[-1]["count"]


def _calls(result: ScenarioResult) -> list[tuple[str, Any]]:
    return [(call["op"], (call.get("args") or {}).get("client_submission_id")) for call in result.calls]


@pytest.mark.parametrize("fault", VARIANTS)
def test_a_broken_runtime_fails_the_same_scenarios_shared_or_not(tmp_path, fault):
    options = binding_options(tmp_path, fault, cold_turn_to_its_killers(fault, SELECTION))
    # Run alone: the turns that passed on a server earlier turns used (the others were judged alone already).
    shared, alone = shared_and_alone(options, leave_out=SELECTION if fault == ONE_KEY_RACE else ())
    judged_as_alone(shared, alone)
    must_fail = [scenario_id for scenario_id in killed_by(fault) if scenario_id in SELECTION]
    assert must_fail
    if fault == ONE_KEY_RACE:
        assert {scenario_id for scenario_id, result in shared.items() if result.status != "passed"} == set(must_fail)
    for scenario_id in must_fail:
        assert shared[scenario_id].status == "failed", (scenario_id, shared[scenario_id].reason)
    # A failure ends the server it used: the next sharing scenario starts a fresh one and says why.
    order = [turn for turn in TURNS if turn in shared and "shared_server" in shared[turn].evidence]
    followed = [(earlier, later) for earlier, later in pairwise(order) if shared[earlier].status != "passed"]
    # Every sharing scenario this kills has a sharing one after it.
    assert followed or not [scenario_id for scenario_id in must_fail if scenario_id in order]
    for earlier, later in followed:
        evidence = shared[later].evidence["shared_server"]
        assert evidence["started_by_this_scenario"] and evidence["used_before_by"] == [], (earlier, later)
        assert f"{earlier} used was ended because it ended failed" in evidence["fresh_start"]


#: What a sharing scenario may not do to the server it shares, each refused before it
#: touches the server.
OWN_PROCESS_ACTS = {
    "kill": lambda ctx: ctx.kill(),
    "restart": lambda ctx: ctx.restart(),
    "stop": lambda ctx: ctx.stop(),
    "spawn": lambda ctx: ctx.spawn(1),
    "unstarted": lambda ctx: ctx.unstarted(),
    "second start": lambda ctx: ctx.start(),
}


def test_a_sharing_scenario_that_needs_its_own_process_is_a_kit_bug(tmp_path, reference_hello):
    """Each act is refused before it touched the server, so each is tried on the one
    server: a server each showed nothing more."""
    options = binding_options(tmp_path, None, ("WT-CREATE",))
    entry = select(options.only, options.skip)[0]
    server = SharedServer(options.way_in, call_timeout=options.call_timeout, start_timeout=options.start_timeout)
    lease = server.lend(entry.id)
    unused = lambda: pytest.fail("a sharing scenario makes no connection of its own")  # noqa: E731
    ctx = Context(entry, unused, reference_hello, 1, 2, shared=(server, lease))
    try:
        ctx.start()
        for name, act in OWN_PROCESS_ACTS.items():
            try:
                act(ctx)
            except CatalogueViolation as exc:
                assert "shares a server" in str(exc), (name, exc)
            else:
                pytest.fail(f"{name}: not refused")
            assert ctx.conn.alive, name  # refused before it touched the server
    finally:
        server.give_back(lease)
        server.close()
    assert not ctx.conn.alive  # a lease that did not pass ends the server


def test_what_escaped_a_shared_server_is_named_by_the_turn_that_ended_it(tmp_path, reference_hello, monkeypatch):
    """Each server's start leaves a setsid process holding its output. A server ends in
    a turn, before that turn's result is written: the result of the turn that failed on
    it, or of the last turn the run expects, names the process that escaped it. One run
    shows both (digest-ignored fails CONFLICT-DIGEST on the server WT-CREATE handed on;
    INVALID-KEY, the last, ends the next), and that a turn that passed and handed the
    server on names nothing: the reference's run showed only those again. CONFLICT-DIGEST,
    judged again on a server of its own, shows that such a server names what escaped it,
    as before sharing (A4-MULTIPROCESS's eight servers here showed only that, eight times,
    with a second's grace for each)."""
    only = ("WT-CREATE", "CONFLICT-DIGEST", "INVALID-KEY")
    # Each server's end waits this long for its pipes to close, and what escaped holds them
    # for 120 s: a second (the kit's grace) showed no more than a fifth of one, three times.
    monkeypatch.setattr("retryproof.adapters.binding.connection.PIPE_GRACE_S", 0.2)
    # A binding's hello is its document's, the same for the variant: from a server that left nothing.
    finished = run(binding_options(tmp_path, "digest-ignored", only, escape=True), reference_hello, [])
    found = {result.entry.id: result for result in finished.results}
    escaped = {scenario_id: result.evidence.get("survivors", []) for scenario_id, result in found.items()}
    started = {int(pid) for pid in (tmp_path / "escaped").read_text().split()}
    try:
        # Every process that escaped a server is named, the shared server's included
        # when a failure's turn ended it and the scenario was judged again alone.
        shared_first = [
            entry
            for result in found.values()
            for entry in result.evidence.get("failed_first_on_shared_server", {}).get("survivors", [])
        ]
        named = {entry["pid"] for entries in [*escaped.values(), shared_first] for entry in entries}
        assert named == started, (started, escaped, shared_first)
        assert len(started) == 3  # the handshake's server, CONFLICT-DIGEST's own, INVALID-KEY's
        assert found["CONFLICT-DIGEST"].status == "failed"
        # Its failed turn ended the shared server; its run alone, on a server of its own, ended that one.
        assert [entry["command"] for entry in shared_first] == ["sleep 120"], shared_first
        for scenario_id in only:
            commands = [entry["command"] for entry in escaped[scenario_id]]
            assert commands == ([] if scenario_id == "WT-CREATE" else ["sleep 120"]), (scenario_id, escaped)
    finally:
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_sharing_scenario_gets_no_state_directory_of_its_own(monkeypatch):
    """Its state is the shared server's: the runner makes no scratch directory for it,
    and does for one that does not share (a harness run's A2-RESPONSE-LOSS: a harness
    start, where a binding's A4-MULTIPROCESS started eight servers)."""
    from retryproof.conformance import runner

    options = harness_options(None, ("WT-CREATE", "A2-RESPONSE-LOSS"))
    hello, kept = handshake(options)  # its scratch is the shared server's first
    made: list[str] = []
    original = runner.Scratch

    def counted(prefix: str):
        made.append(prefix)
        return original(prefix)

    monkeypatch.setattr(runner, "Scratch", counted)
    finished = run(options, hello, [], kept)
    assert [result.status for result in finished.results] == ["passed", "passed"]
    assert made == ["retryproof-a2-response-loss-"]


class _Dying:
    """A connection whose server dies between two turns, leaving one escaped process."""

    def __init__(self):
        self.alive = False
        self._survivors: list[dict[str, Any]] = []

    def start(self) -> None:
        self.alive = True

    def kill(self) -> None:  # the kill finds what escaped its group
        self.alive = False
        self._survivors = [{"pid": 4242, "command": "escaped"}]

    def exchanges(self) -> list:
        return []

    def protocol_noise(self) -> list:
        return []

    def exit_statuses(self) -> list:
        return []

    def survivors(self) -> list[dict[str, Any]]:
        return list(self._survivors)


class _Target:
    def __init__(self):
        self.made: list[_Dying] = []

    def connect(self, scratch, **_: float) -> _Dying:
        self.made.append(_Dying())
        return self.made[-1]


def test_what_escaped_a_server_that_died_between_turns_is_named_by_the_next_turn():
    target = _Target()
    server = SharedServer(target, call_timeout=1, start_timeout=1, users=2)
    first = server.lend("WT-CREATE")
    server.connection(first)
    server.settle(first, "passed")
    server.give_back(first)
    target.made[0].alive = False  # it died on its own between the turns
    second = server.lend("INVALID-KEY")
    assert second.last
    server.connection(second)
    evidence = second.evidence()
    assert evidence["started_by_this_scenario"] and "no longer running" in evidence["fresh_start"]
    assert evidence["earlier_server_survivors"] == [{"pid": 4242, "command": "escaped"}]
    server.settle(second, "passed")
    server.give_back(second)
    assert "earlier_server_survivors" not in first.evidence()
    assert target.made[1].survivors()  # the last turn ended its server: its kill found what escaped


#: The scenarios that restart only where the restart is what they test: a turn on the
#: shared server, ended and restarted on its state as they must (``takes_server``).
TAKING = ("A2-RESPONSE-LOSS", "A2-CRASH-BEFORE-RESPONSE", "RESTART-REUSE")
#: The takers whose restarts are compared with their run alone. The reference's other
#: runs alone would show only that it passes: it has no defect for sharing to hide, and
#: a failure sharing made shows in the shared run, which must pass every scenario.
COMPARED_RESTARTS = ("A2-CRASH-BEFORE-RESPONSE", "RESTART-REUSE")


@pytest.mark.parametrize("fault", [None, "no-idempotency", "memory-dedup"])
def test_a_scenario_that_takes_the_server_is_judged_as_on_its_own(tmp_path, fault, request):
    """The same statuses taking the shared server as on a server of its own; a
    variant whose defect a restart reveals (memory-dedup) still fails where it must; a
    turn that restarted the server ends it, so the next user starts a fresh one (told
    why), and a turn that did not hands it on. The first taker takes the server the
    sharing scenarios used. The reference's runs are those of its test above."""
    if fault is None:
        only = (*TURNS, *TAKING)  # in the order of their turns: the takers last
        shared, alone = request.getfixturevalue("reference_runs")
        assert set(judged_as_alone(shared, alone)) == {*TURNS, *COMPARED_RESTARTS}
    else:
        only = ("WT-CREATE", "INVALID-KEY", *TAKING)
        shared, alone = shared_and_alone(binding_options(tmp_path, fault, only))
        assert set(judged_as_alone(shared, alone)) == set(only)
    assert all(registry()[scenario_id].takes_server for scenario_id in TAKING)
    for scenario_id in killed_by(fault) if fault else ():
        if scenario_id in only:
            assert shared[scenario_id].status == "failed", (scenario_id, shared[scenario_id].reason)
    if fault is None:
        assert set(statuses(shared).values()) == {"passed"}
        used = [shared[scenario_id].evidence["shared_server"] for scenario_id in only]
        assert used[0]["server"] == 1
        for index, evidence in enumerate(used[1:]):
            before, after = only[index], only[index + 1]
            restarted = any(op == "start" for op, _ in _faults(shared[before]))
            if restarted:
                assert evidence["started_by_this_scenario"], (before, after)
                assert "it restarted the server in its turn" in evidence["fresh_start"], (before, after)
            else:
                assert not evidence["started_by_this_scenario"] and before in evidence["used_before_by"], (
                    before,
                    after,
                )
        assert any(any(op == "start" for op, _ in _faults(shared[s])) for s in TAKING)
        # Its restarts are its own, numbered from its first process, as on a server of its own.
        for scenario_id in COMPARED_RESTARTS:
            faults = _faults(shared[scenario_id])
            assert faults and faults == _faults(alone[scenario_id]), scenario_id


def _faults(result: ScenarioResult) -> list[tuple[str, int]]:
    return [(call["op"], call["process"]) for call in result.calls if call["kind"] == "fault"]


def test_a_scenario_that_takes_the_server_still_needs_no_process_beside_it(tmp_path, reference_hello):
    """It may end and restart the shared server; a process of its own, or failpoints
    (also on a restart), stay refused; a turn that restarted the server ends it."""
    options = binding_options(tmp_path, None, ("A2-CRASH-BEFORE-RESPONSE",))
    entry = select(options.only, options.skip)[0]
    server = SharedServer(options.way_in, call_timeout=options.call_timeout, start_timeout=options.start_timeout)
    lease = server.lend(entry.id)
    unused = lambda: pytest.fail("a scenario on the shared server makes no connection of its own")  # noqa: E731
    ctx = Context(entry, unused, reference_hello, 1, 2, shared=(server, lease), takes=True)
    try:
        ctx.start()
        ctx.restart(graceful=True)
        ctx.restart()
        assert ctx.conn.alive and len(ctx.conn.exit_statuses()) == 3
        armed = {"write_task.after_commit": "crash"}  # one its entry may use
        for act in (lambda: ctx.spawn(1), lambda: ctx.unstarted(), lambda: ctx.restart(failpoints=armed)):
            with pytest.raises(CatalogueViolation, match=r"takes_server=True"):
                act()
        server.settle(lease, "passed")
        assert not ctx.conn.alive  # restarted in its turn: ended, not handed on
    finally:
        server.give_back(lease)
        server.close()


def _counted_starts(monkeypatch) -> list[str]:
    from retryproof.adapters.binding.connection import BindingConnection

    started: list[str] = []
    original = BindingConnection.start

    def start(connection, *args, **kwargs):
        started.append(connection.state_dir)
        return original(connection, *args, **kwargs)

    monkeypatch.setattr(BindingConnection, "start", start)
    return started


def test_the_handshake_server_is_the_first_shared_one(tmp_path, monkeypatch):
    """The server the handshake started serves the sharing scenarios: one start in all,
    on a fresh state directory, so its first user still checks that its first listing is empty."""
    options = binding_options(tmp_path, None, ("WT-CREATE", "INVALID-KEY"))
    started = _counted_starts(monkeypatch)
    hello, kept = handshake(options)
    assert kept is not None
    finished = run(options, hello, [], kept)
    found = {result.entry.id: result for result in finished.results}
    assert [result.status for result in finished.results] == ["passed", "passed"]
    assert len(started) == 1
    first = found["WT-CREATE"].evidence["shared_server"]
    assert first["started_by_handshake"] and not first["started_by_this_scenario"]
    assert first["used_before_by"] == []
    assert found["INVALID-KEY"].evidence["shared_server"]["used_before_by"] == ["WT-CREATE"]


def test_a_binding_server_that_cannot_start_is_the_runs_one_error_even_where_nothing_shares(tmp_path):
    """A binding's hello needs no server, but its handshake starts it anyway, whether a
    scenario will share it or not: a server that cannot start is the run's one typed
    error, exit 2 with its stderr. Left to the scenarios (``--only CRASH-POINTS`` shares
    nothing), it was an error per scenario, and CRASH-POINTS, starting it under strace,
    said strace could not run the runtime here."""
    document = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "adapters" / "bindings" / "reference-http.yaml").read_text()
    )
    document["start"]["command"] = ["{python}", "-c", "import sys; sys.exit('no such service here')"]
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    done = retryproof_here("run", "--binding", str(path), "--only", "CRASH-POINTS", "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "failed its handshake" in done.stderr and "no such service here" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_cold_server_scenario_is_the_first_user_of_its_server(tmp_path, monkeypatch, reference_hello, reference_runs):
    """A4-CONCURRENT's turn comes first in a run, on the handshake's server, which no call
    reached: no start of its own (the reference's runs show it). Where a caller takes the
    turns in catalogue order (the pytest plugin), a server WT-CREATE used is ended for it,
    and it starts a fresh one. Its evidence is the same on either."""
    options = binding_options(tmp_path, None, ("WT-CREATE", "A4-CONCURRENT"))
    started = _counted_starts(monkeypatch)
    session = Run(options, reference_hello, [], 2)
    try:
        found = {item.id: session.scenario(item) for item in select(options.only, options.skip)}
    finally:
        session.close()
    assert [result.status for result in found.values()] == ["passed", "passed"]
    assert found["WT-CREATE"].evidence["shared_server"]["server"] == 1
    cold = found["A4-CONCURRENT"].evidence["shared_server"]
    assert cold["started_by_this_scenario"] and cold["used_before_by"] == [] and cold["server"] == 2
    assert cold["fresh_start"] == "A4-CONCURRENT needs a server no other scenario used"
    assert len(started) == 2
    on_the_handshakes = reference_runs[0]["A4-CONCURRENT"]
    assert on_the_handshakes.evidence["shared_server"]["started_by_handshake"]
    same_calls_and_counts(on_the_handshakes, found["A4-CONCURRENT"])


def test_a_harness_run_with_no_sharing_scenario_ends_the_handshake_harness():
    """A harness's hello needs its start: with no sharing scenario, the run ends the
    harness its handshake kept, at once."""
    options = harness_options(None, ("A4-MULTIPROCESS",))
    hello, kept = handshake(options)
    assert kept is not None
    connection, scratch = kept.take() or pytest.fail("the handshake kept no harness")
    kept = Handshake(connection, scratch)
    session = Run(options, hello, [], 1, selection=select(options.only, options.skip), handshake=kept)
    try:
        assert not connection.alive  # ended at once: no user would come
        assert kept.take() is None
    finally:
        session.close()


def test_the_scenarios_that_only_share_take_their_turns_before_one_that_restarts(tmp_path, monkeypatch):
    """RESTART-REUSE comes before REUSE-EARLIER-ID in the catalogue, and its turn ends
    the server it restarted: the sharing scenarios go first, so all three use the
    handshake's server (three starts: it and RESTART-REUSE's two restarts, not a fresh
    server after them), in the same order whatever --jobs says: here on three jobs; on
    one, the reference's runs show it (their takers, RESTART-REUSE among them, take
    their turns after every sharing one, all on server 1)."""
    options = replace(binding_options(tmp_path, None, ("WT-CREATE", "RESTART-REUSE", "REUSE-EARLIER-ID")), jobs=3)
    started = _counted_starts(monkeypatch)
    hello, kept = handshake(options)
    finished = run(options, hello, [], kept)
    assert [result.entry.id for result in finished.results] == ["WT-CREATE", "RESTART-REUSE", "REUSE-EARLIER-ID"]
    assert all(result.status == "passed" for result in finished.results), finished.results
    used = {result.entry.id: result.evidence["shared_server"] for result in finished.results}
    assert {item["server"] for item in used.values()} == {1}, used
    assert used["REUSE-EARLIER-ID"]["used_before_by"] == ["WT-CREATE"]
    assert used["RESTART-REUSE"]["used_before_by"] == ["WT-CREATE", "REUSE-EARLIER-ID"]
    assert len(started) == 3, started


def harness_options(fault: str | None, only: tuple[str, ...]) -> Options:
    """A run of ``only`` against the reference (or its variant ``fault``) as a harness."""
    command = shlex.join([*REFERENCE, *(["--fault", fault] if fault else [])])
    args = build_parser("run").parse_args(
        ["run", "--harness", command, "--seed", "3", "--jobs", "1", "--start-timeout", "60", "--only", ",".join(only)]
    )
    return from_arguments(args)


#: Variants a scenario of that test must fail (its killed_by names one), each failing, on
#: a harness earlier turns used, a check no other one fails there. Two more proved nothing new:
#: digest-ignored fails CONFLICT-DIGEST's expected conflict, which fuzzy-subject-dedup
#: fails there too (and digest-ignored over a binding, in the escaped-process test);
#: memory-dedup's killers are takes_server scenarios, which a harness run starts on
#: harnesses of their own: no-idempotency's run shows that with a variant two of them must fail.
HARNESS_VARIANTS = (
    "no-idempotency",
    "fuzzy-subject-dedup",
    "invocation-in-digest",
    "digest-without-nfc",
    "legacy-says-idempotent",
    "reuse-answers-newest",
)
#: Of those, the variants whose defect lies in one call's answer (its digest, its
#: idempotent flag), not across keys as a dedup by subject, the newest task or no dedup
#: at all: a scenario their defect does not kill sees what it sees of the reference,
#: whose shared run passes them all, so their shared run must fail exactly their
#: killers (judged alone by the runner, on the inherited harness) and pass the rest.
#: Running the rest alone as well showed only that they pass alone.
ONE_CALL_DEFECTS = ("invocation-in-digest", "digest-without-nfc", "legacy-says-idempotent")


def test_a_harness_run_gives_its_sharing_scenarios_the_handshakes_harness(reference_run: WholeRun):
    """A harness run gives its shares_server scenarios one harness process, the one its
    handshake started, whatever its jobs; every other scenario (the takes_server ones:
    A2-CRASH-BEFORE-RESPONSE arms a failpoint) starts its own. The reference's whole run
    shows it (test_reference_run's, which it passes: its run here, of the sharing and
    taking scenarios alone, showed only that again)."""
    used = {
        scenario_id: scenario["evidence"].get("shared_server")
        for scenario_id, scenario in by_id(reference_run.report()).items()
    }
    sharing = {scenario_id for scenario_id, bound in registry().items() if bound.shares_server}
    assert {scenario_id for scenario_id, evidence in used.items() if evidence} == sharing, used
    assert all(
        evidence["server"] == 1 and evidence["started_by_handshake"] and not evidence["started_by_this_scenario"]
        for scenario_id, evidence in used.items()
        if scenario_id in sharing
    ), used


@pytest.mark.parametrize("fault", HARNESS_VARIANTS)
def test_a_harness_run_shares_its_harness_and_judges_as_alone(fault):
    """A broken runtime fails the same scenarios on a shared harness as on harnesses of
    its own. The takes_server ones start a harness of their own and run as they would
    alone (no shared_server in their evidence), so only the shared run has them, between
    the sharing turns: running them again alone repeated the same scenarios on the same
    path, a third of each alone run's harness starts. They run with a variant one of them
    must fail: with the others (whose killers are all sharing scenarios) they repeated the
    reference's proof, on harnesses of their own."""
    sharing = tuple(scenario_id for scenario_id, bound in registry().items() if bound.shares_server)
    sharing = cold_turn_to_its_killers(fault, sharing)
    takes = ("RESTART-REUSE", "A2-RESPONSE-LOSS", "A2-CRASH-BEFORE-RESPONSE")
    if not set(takes) & set(killed_by(fault)):
        takes = ()
    options = harness_options(fault, (*sharing, *takes))
    must_fail = [scenario_id for scenario_id in killed_by(fault) if scenario_id in options.only]
    assert must_fail
    # A failure sharing made shows in the shared run, which must pass every scenario but
    # the killers of a defect in one call's answer (``ONE_CALL_DEFECTS``).
    every_one_alone = fault not in ONE_CALL_DEFECTS
    shared, alone = shared_and_alone(options, leave_out=takes if every_one_alone else (*sharing, *takes))
    judged = judged_as_alone(shared, alone)
    if every_one_alone:
        assert set(shared) - set(judged) == set(takes)
    else:
        assert {scenario_id for scenario_id, result in shared.items() if result.status != "passed"} == set(must_fail)
    assert not [scenario_id for scenario_id in takes if "shared_server" in shared[scenario_id].evidence]
    # A failure ends the shared harness: the next sharing scenario starts a fresh one.
    order = [scenario_id for scenario_id in shared if "shared_server" in shared[scenario_id].evidence]
    for earlier, later in pairwise(order):
        if shared[earlier].status != "passed":
            assert shared[later].evidence["shared_server"]["started_by_this_scenario"], (earlier, later)
    for scenario_id in must_fail:
        assert shared[scenario_id].status == "failed", (scenario_id, shared[scenario_id].reason)


def test_a_failure_only_after_earlier_turns_says_so_and_reproduces_with_them(tmp_path):
    """A listing that drops tasks past a page fails DISTINCT-IDS-DISTINCT-TASKS only on a
    server that earlier turns filled: the failure stands (the contract broke on state the
    contract made), is judged again on a fresh server (``alone``), and its reproduce line
    runs the earlier turns first, so the same failure comes back, where the scenario's
    own ``--only`` would pass."""
    harness = f"{STDLIB_PYTHON} {Path(__file__).with_name('paging_harness.py')} 12 {shlex.join(REFERENCE)}"
    earlier = (
        "REUSE-EARLIER-ID",
        "CONFLICT-DIGEST",
        "CONFLICT-SCHEMA",
        "NORMALIZED-EQUAL",
        "INVOCATION-FIELDS-IGNORED",
    )
    only = ",".join((*earlier, "DISTINCT-IDS-DISTINCT-TASKS"))
    done, report = certify(tmp_path / "shared", harness, "--only", only, seed=3, in_process=True)
    scenario = by_id(report)["DISTINCT-IDS-DISTINCT-TASKS"]
    assert scenario["status"] == "failed", done.stdout
    assert scenario["evidence"]["shared_server"]["used_before_by"] == list(earlier)
    assert scenario["evidence"]["alone"] == {"status": "passed", "reason": None}
    assert "on a fresh server of its own it passed" in scenario["reason"]
    assert scenario["reproduce"].startswith(f"retryproof run --only {only} --seed 3 ")
    _, alone = certify(tmp_path / "alone", harness, "--only", "DISTINCT-IDS-DISTINCT-TASKS", seed=3, in_process=True)
    assert by_id(alone)["DISTINCT-IDS-DISTINCT-TASKS"]["status"] == "passed"
