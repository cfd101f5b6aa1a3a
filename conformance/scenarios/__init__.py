"""The scenario API: how a scenario of the catalogue is written and run.

Declaring
---------
A scenario is a function of one argument, a ``Context``, bound to a catalogue id of
``spec/retryproof.yaml`` with the ``scenario`` decorator::

    from retryproof.conformance.scenarios import Context, scenario

    @scenario("A2-RESPONSE-LOSS")
    def response_loss(ctx: Context) -> None:
        ...

The id must exist in the catalogue (a typo fails at import). Title, level
(MUST/SHOULD), requirements, checklist questions and needs come from the spec, never
from the code. Every module of this package is imported by ``registry()``, so every
scenario lives here. A catalogue id with no registered
function is reported by the run as ``error`` "not implemented" (``missing_ids()``).

Needs
-----
The runner checks the entry's ``needs`` before calling the function: a capability
the runtime's ``hello`` does not declare, a failpoint it does not list, or a tool
(``tool:strace``) not on PATH makes the scenario ``skipped`` with the reason. The
function may still call ``ctx.skip(reason)`` for a need found at run time.

The runtime
-----------
Each scenario gets a fresh state directory, the same one across its restarts.
A scenario that needs a fresh key, not a fresh process, says so with
``@scenario(ID, shares_server=True)``: it starts the runtime once, with no failpoint,
never kills, stops, restarts or spawns, and judges only its own calls and keys; it
then takes its turn on one server the run's other such scenarios use too, never beside
them (``retryproof.conformance.sharing``; the context refuses the rest as a kit bug).
One that restarts the runtime only where the restart (a kill, a lost answer that ends
a stdio server) is what it tests says ``@scenario(ID, takes_server=True)``: in a
binding run its first start, without failpoints, is its turn on that server, and its
restarts are on the shared state directory.

- ``ctx.start(failpoints={"write_task.after_commit": "crash"})`` starts the harness
  (``ctx.conn`` is that connection);
- ``ctx.kill()`` SIGKILLs its process group; ``ctx.restart(failpoints=None,
  graceful=False)`` kills (or, graceful, ``shutdown``s) and starts again on the same
  state; ``ctx.stop()`` shuts down; ``ctx.spawn(n)`` starts n more processes on the same
  state directory (``multiprocess``). The runner ends every process afterwards.
- ``ctx.call(op, args)`` makes one call; ``ctx.write_task(submission_id, task,
  invocation)`` is the common one (None id = legacy path); ``ctx.concurrently([(op,
  args), ...])`` pipelines calls on one connection before reading any answer;
  ``ctx.in_parallel(connections, [(op, args), ...])`` pipelines the same calls on every
  connection at once;
  ``ctx.send_line(raw)`` sends a line that is not a request.
- ``with ctx.alone():`` runs a block with no other scenario beside it under ``--jobs``
  (races whose calls must really overlap); the scenario declares it with
  ``@scenario(ID, alone=True)``.
- Seeded data: ``ctx.submission_id()``, ``ctx.task(**overrides)``, ``ctx.rng``
  (``random.Random`` seeded with the run seed and the scenario id, so ``--only ID
  --seed N`` replays the same choices); ``ctx.concurrency`` is ``--concurrency`` and
  ``ctx.call_timeout`` is ``--call-timeout`` (one deadline covers a whole pipelined
  batch). A scenario whose outcome depends on the environment (FUZZ-MODEL's profile)
  records it in ``ctx.reproduce_env``, so the reproduce line sets it again.

Outcomes and judging
--------------------
Every call returns a ``Call`` whose ``kind`` is ``ok`` (a success), ``fail`` (a
rejection that provably wrote nothing: listed error codes and ``conflict``) or ``info``
(indeterminate: no answer, or an error that may follow the effect). Every success is
validated against ``$defs/<op>_result`` of ``spec/schemas/harness-response.json``; a
violation fails the scenario with the validator's message.

- ``ctx.expect_ok(call, what)``, ``ctx.expect_disposition(call, "reused", what)``,
  ``ctx.expect_conflict(call, "digest_mismatch", what)``, ``ctx.expect_error(call,
  code, what)`` and ``ctx.check(condition, message)`` fail the scenario
  (``ScenarioFailed``) when the runtime answered wrongly; when it did not answer at
  all they raise ``Unjudgeable`` (status ``error``: the kit could not judge).
- Invariants are judged on authoritative state: ``ctx.tasks(label)`` is
  ``list_tasks`` (recorded as evidence under ``label``), and ``ctx.check_tasks(before,
  after, new=n)`` runs the set checker (``retryproof.conformance.set_check``) on the
  scenario's history, then checks that exactly n tasks are new.
- ``ctx.receipt(submission_id, label)`` records the runtime's diagnostics of a receipt
  when it declares ``diagnose``; ``ctx.note(key, value)`` attaches any JSON fact.
- ``ctx.not_applicable(reason)`` ends the scenario ``not_applicable`` (the runtime took
  an allowed path the scenario cannot judge; say why, with evidence noted first).

A function that returns normally has ``passed``. The runner adds the calls, the
final task snapshot and, for failures and errors, the harness stderr to the evidence.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from retryproof.conformance.catalogue import Entry, catalogue, entry
from retryproof.conformance.context import (
    Context,
    NotApplicable,
    ScenarioFailed,
    Skipped,
    TaskSet,
    Unjudgeable,
)

__all__ = [
    "Context",
    "NotApplicable",
    "Scenario",
    "ScenarioFailed",
    "Skipped",
    "TaskSet",
    "Unjudgeable",
    "missing_ids",
    "registry",
    "scenario",
]

ScenarioFunction = Callable[[Context], None]


@dataclass(frozen=True)
class Scenario:
    """A catalogue entry bound to the function that runs it, as ``@scenario`` declared it.

    How ``--jobs`` schedules it: ``alone`` says that part of it needs the machine to
    itself (the part in ``with ctx.alone():``; see the README, "Parallel runs"), and
    starts it first; ``long``, about how many typical scenarios it takes (many restarts,
    many calls, waits; 0 for a typical one), starts it before the short ones, the longest
    first, so the run ends near the end of its longest scenario instead of one running
    on alone at the end; and never while a scenario with an alone part runs, which would
    wait it out. ``shares_server``: it needs a fresh key, not a fresh process, so a
    run gives it a turn on its shared server (``sharing.py``). ``takes_server``: it
    needs a fresh key for its first start, and a restart (a kill, a lost answer that
    ends a stdio server) only where that is what it tests, so in a binding run it takes
    its turn on the shared server too, ends and restarts it on the shared state
    directory as it must; a turn that restarted it ends it (``sharing.py``). A harness
    run starts it a harness of its own: its turn would end the shared one anyway, and
    where the harness lists the failpoint it tests (A2-CRASH-BEFORE-RESPONSE) its
    first start arms it, which no shared server may. ``cold_server``, with
    ``shares_server``: its turn must be a server's first, one no scenario's call reached
    (A4-CONCURRENT races a cold runtime, then a warm one): its turn comes before the
    other sharing scenarios' (the run's first server is the handshake's, which answered
    no call), and a server others used is ended for it and a fresh one started.
    """

    entry: Entry
    run: ScenarioFunction
    alone: bool = False
    long: int = 0
    shares_server: bool = False
    takes_server: bool = False
    cold_server: bool = False

    def lends(self, through_binding: bool) -> bool:
        """Whether a run (through a binding or not) gives it a turn on the shared server."""
        return self.shares_server or (self.takes_server and through_binding)


_REGISTRY: dict[str, Scenario] = {}


def scenario(
    scenario_id: str,
    *,
    alone: bool = False,
    long: int = 0,
    shares_server: bool = False,
    takes_server: bool = False,
    cold_server: bool = False,
) -> Callable[[ScenarioFunction], ScenarioFunction]:
    """Bind a function to a catalogue id (a ``Scenario``; see there for ``alone``,
    ``long``, ``shares_server``, ``takes_server`` and ``cold_server``). The function
    itself is returned unchanged."""
    bound_entry = entry(scenario_id)  # KeyError on an id the spec does not know

    def bind(function: ScenarioFunction) -> ScenarioFunction:
        existing = _REGISTRY.get(scenario_id)
        # The same function again is its module imported a second time (a test session
        # that dropped and re-imported it); any other is a second binding of the id.
        if existing is not None and _name(existing.run) != _name(function):
            raise ValueError(f"{scenario_id} is bound twice: {_name(existing.run)} and {_name(function)}")
        _REGISTRY[scenario_id] = Scenario(bound_entry, function, alone, long, shares_server, takes_server, cold_server)
        return function

    return bind


def _name(function: ScenarioFunction) -> str:
    return f"{function.__module__}.{function.__qualname__}"


def registry() -> dict[str, Scenario]:
    """Import every scenario module and return id -> its ``Scenario``."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return dict(_REGISTRY)


def missing_ids() -> list[str]:
    """Catalogue ids with no implementation; each runs as ``error`` "not implemented"."""
    bound = registry()
    return [item.id for item in catalogue() if item.id not in bound]
