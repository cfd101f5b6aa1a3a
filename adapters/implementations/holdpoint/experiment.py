"""holdpoint's two approval failures, shown without the kit.

Run with this folder's interpreter: ``.venv/bin/python experiment.py``. Each part uses
only holdpoint, sqlite3 and a marker line per effect in a temporary directory.

1. The start audit row fails: ``approve(execute=True)`` raises and nothing runs, the
   action stays ``approved``; ``recover()`` in a new instance then runs it, a decision
   the caller who saw the error never made again.
2. The request changes after the effect: ``recover()`` takes no request, so it
   reconciles the action under the arguments it stored.
"""

from __future__ import annotations

import inspect
import os
import sqlite3
import tempfile

from holdpoint import HoldPoint, HoldPointError, SQLiteStore


def effects(folder: str) -> int:
    try:
        with open(os.path.join(folder, "effects.log")) as log:
            return len(log.readlines())
    except FileNotFoundError:
        return 0


def holdpoint(folder: str):
    hold = HoldPoint(store=SQLiteStore(os.path.join(folder, "hold.sqlite")))

    def apply(target: str) -> str:
        with open(os.path.join(folder, "effects.log"), "a") as log:
            log.write(target + "\n")
        return "applied"

    return hold, hold.guard(kind="apply")(apply)


def start_audit_fails() -> None:
    with tempfile.TemporaryDirectory() as folder:
        hold, apply = holdpoint(folder)
        action = apply("repo-1")
        with sqlite3.connect(os.path.join(folder, "hold.sqlite")) as db:  # the audit log refuses the claim's row
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON audit_log WHEN NEW.event = 'execution_started' "
                "BEGIN SELECT RAISE(ABORT, 'audit down'); END"
            )
        try:
            hold.approve(action.id, actor="alice")
        except HoldPointError as exc:
            print(f"1. approve(execute=True) with the start audit failing: {type(exc).__name__}: {exc}")
        print(f"   status: {hold.get(action.id).status.value}; effects: {effects(folder)}")
        with sqlite3.connect(os.path.join(folder, "hold.sqlite")) as db:
            db.execute("DROP TRIGGER refuse")
        restarted, _ = holdpoint(folder)
        report = restarted.recover()
        print(
            f"   recover() in a new instance resumed {[a.status.value for a in report.resumed]}; effects: {effects(folder)}"
        )


def changed_request() -> None:
    print(f"2. recover{inspect.signature(HoldPoint.recover)}: no recalculated request to compare")


if __name__ == "__main__":
    start_audit_fails()
    changed_request()
