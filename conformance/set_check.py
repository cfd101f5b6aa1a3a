"""The set checker: one pure function of (call history, listing before, listing after).

As Jepsen's set checker does, it judges the authoritative state (``list_tasks``)
against what the calls could have done, never against what they merely returned
(OUTCOME-R1). A call is ``ok``, ``fail`` (provably wrote nothing) or ``info``
(indeterminate), so:

* a task an ``ok`` result named must be listed (else *lost*), under the id of that
  call (else *misplaced*), and all ``ok`` results of one id name one task (else *split*);
* a listed task must be one some call could have made: under an id some call that is
  not ``fail`` used, at most one per id, and no more id-less tasks than legacy calls
  that are not ``fail`` (else *unexpected* or *duplicated*);
* a task listed before is still listed after (else *vanished*), unless an ``ok``
  ``tamper remove_task`` in the history removed it on purpose.

The scenarios (``Context.check_tasks``) and FUZZ-MODEL (``Driver.check``) both judge
through ``check_sets``; how many tasks a scenario expects is the scenario's own check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retryproof.conformance.outcome import Call, HistoryEvent

Listing = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class SetCheck:
    """What ``check_sets`` found; every field but ``added`` is a violation."""

    added: tuple[str, ...]
    lost: tuple[str, ...]
    misplaced: tuple[str, ...]
    split: tuple[str, ...]
    unexpected: tuple[str, ...]
    duplicated: tuple[str, ...]
    vanished: tuple[str, ...]

    def problems(self) -> list[str]:
        """One sentence per kind of violation, the gravest first; empty when none."""
        found = [
            (self.lost, "lost: tasks returned by successful calls are missing from list_tasks"),
            (self.misplaced, "a successful call's task is listed under another submission id"),
            (self.duplicated, "unexpected tasks: a second task for one id"),
            (self.split, "successful calls for one submission id named different tasks"),
            (self.unexpected, "unexpected tasks no call could have made"),
            (self.vanished, "tasks disappeared from list_tasks"),
        ]
        return [f"{what}: {'; '.join(items)}" for items, what in found if items]

    def evidence(self) -> dict[str, Any]:
        return {
            "new_tasks": len(self.added),
            **{
                name: list(getattr(self, name))
                for name in ("lost", "misplaced", "split", "unexpected", "duplicated", "vanished")
            },
        }


def check_sets(history: Iterable[HistoryEvent], before: Listing, after: Listing) -> SetCheck:
    """Judge ``after`` (a ``list_tasks`` listing) against ``before`` and every event of
    ``history``. Pure: it reads its arguments and nothing else."""
    calls = [event for event in history if isinstance(event, Call)]
    writes = [call for call in calls if call.op == "write_task"]
    removed = {
        str(call.args.get("task_id"))
        for call in calls
        if call.op == "tamper" and call.kind == "ok" and call.args.get("action") == "remove_task"
    }
    may_write = [call for call in writes if call.kind != "fail"]
    used_ids = {_submission(call) for call in may_write} - {None}
    legacy_calls = sum("client_submission_id" not in call.args for call in may_write)

    before_ids = {task_id(task) for task in before}
    owner = {task_id(task): task.get("client_submission_id") for task in after}
    by_submission: dict[Any, list[str]] = {}
    for task in after:
        by_submission.setdefault(task.get("client_submission_id"), []).append(task_id(task))
    added = [task_id(task) for task in after if task_id(task) not in before_ids]

    named: dict[Any, list[str]] = {}
    for call in writes:
        if call.kind == "ok" and call.task_id is not None:
            named.setdefault(_submission(call), []).append(str(call.task_id))
    lost = sorted({task_id for ids in named.values() for task_id in ids if task_id not in owner} - removed)
    misplaced = sorted(
        f"{task_id} (answered to {submission_id}, listed under {owner[task_id]})"
        for submission_id, ids in named.items()
        for task_id in set(ids)
        if task_id in owner and owner[task_id] != submission_id
    )
    split = sorted(
        f"{submission_id}: {', '.join(sorted(set(ids)))}"
        for submission_id, ids in named.items()
        if submission_id is not None and len(set(ids)) > 1
    )
    history_ids = {_submission(call) for call in writes} - {None}
    duplicated = sorted(
        f"{len(ids)} tasks under one submission id {submission_id}: {', '.join(ids)}"
        for submission_id, ids in by_submission.items()
        if submission_id in history_ids and len(ids) > 1
    )
    new_legacy = [task_id for task_id in added if owner[task_id] is None]
    unexpected = sorted(
        [
            f"{task_id} (under {owner[task_id]}, an id no call used)"
            for task_id in added
            if _stray(owner[task_id], used_ids)
        ]
        + (
            [f"{len(new_legacy)} tasks without an id after {legacy_calls} legacy calls: {', '.join(new_legacy)}"]
            if len(new_legacy) > legacy_calls
            else []
        )
    )
    vanished = sorted(before_ids - set(owner) - removed)
    return SetCheck(
        tuple(added),
        tuple(lost),
        tuple(misplaced),
        tuple(split),
        tuple(unexpected),
        tuple(duplicated),
        tuple(vanished),
    )


def task_id(task: Mapping[str, Any]) -> str:
    """A listed task's id as the checkers compare it (a text, even when a runtime lies)."""
    return str(task.get("task_id"))


def _submission(call: Call) -> str | None:
    """The id a write_task call used; None for the legacy path and for a value that
    is no id at all (a non-string is refused, so it can name no task)."""
    value = call.args.get("client_submission_id")
    return value if isinstance(value, str) else None


def _stray(submission_id: Any, used_ids: set[Any]) -> bool:
    return submission_id is not None and submission_id not in used_ids
