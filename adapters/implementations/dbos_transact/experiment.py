"""The DBOS Transact behaviours behind the matrix's failures, shown without the kit.

Run with this folder's environment: ``.venv/bin/python experiment.py``. Each part runs
the library alone on a fresh SQLite system database in a temporary directory, prints
what it observed, and exits 1 if DBOS did not behave as the README says (so a fixed
release shows up here first).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

from dbos import DBOS, SetWorkflowID

EFFECTS: list[str] = []


@DBOS.workflow()
def create(subject: str, fail: bool) -> str:
    EFFECTS.append(subject)
    if fail:
        raise OSError(5, "the effect's I/O failed once")
    return f"task for {subject}"


def launch(folder: str) -> None:
    DBOS(config={"name": "experiment", "system_database_url": f"sqlite:///{folder}/dbos.sqlite", "log_level": "ERROR"})
    DBOS.launch()


def call(workflow_id: str, subject: str, fail: bool = False) -> str:
    with SetWorkflowID(workflow_id):
        try:
            return create(subject, fail)
        except OSError as exc:
            return f"raised {exc!r}"


def main() -> int:
    if len(sys.argv) == 3:  # the fresh-process half of part 2
        launch(sys.argv[1])
        print(call(sys.argv[2], "same subject, no failure now"))
        DBOS.destroy()
        return 0
    folder = tempfile.mkdtemp(prefix="dbos-experiment-")
    launch(folder)
    first = call("order-1", "first subject")
    second = call("order-1", "a different subject")
    print(f"1. same workflow id, different input: first={first!r} second={second!r} body ran {len(EFFECTS)} time(s)")
    ok = second == first and len(EFFECTS) == 1
    failed = call("order-2", "subject", fail=True)
    retried = call("order-2", "subject")
    DBOS.destroy()
    fresh = subprocess.run(
        [sys.executable, __file__, folder, "order-2"], capture_output=True, text=True, timeout=120
    ).stdout.strip()
    print(f"2. an exception is the recorded outcome: first={failed!r} retry={retried!r} fresh process={fresh!r}")
    ok = ok and failed.startswith("raised") and retried == failed and fresh == failed
    print("as described" if ok else "NOT as described: DBOS behaves differently from the README")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
