"""A CRASH-POINTS report reads the same for one seed: a file the runtime names after its
process (the reference's temporary ``.tmp-<pid>-0``) is shown with ``<pid>`` for that
process's id, in the reason and the evidence alike, while the kill is still judged on
the real name."""

from __future__ import annotations

import os
import threading

from kit import REFERENCE, by_id, certify

from retryproof.conformance.scenarios.crash_points import POINT_ENV, _process_ids, find_points
from retryproof.conformance.strace import entered


def _recording(pid: int, thread: int) -> list[str]:
    """One write as the reference makes it: its first thread says it is ready, a
    request's thread writes a temporary file named after the process and renames it
    into place."""
    return [
        f'{pid} 5.0 write(1<pipe:[1]>, "ready", 5) = 5',
        f'{thread} 11.0 openat(AT_FDCWD</w>, "/state/tasks/.tmp-{pid}-0", O_WRONLY|O_CREAT|O_EXCL, 0644)'
        f" = 4</state/tasks/.tmp-{pid}-0>",
        f'{thread} 11.1 rename("/state/tasks/.tmp-{pid}-0", "/state/tasks/T-1.json") = 0',
    ]


def test_a_target_named_after_its_process_is_shown_without_its_id():
    runs = [find_points(entered(_recording(pid, pid + 1)), "/state", 10.0, 20.0, None).points for pid in (4100, 5200)]
    assert [[point.shown for point in points] for points in runs] == 2 * [
        ["tasks/.tmp-<pid>-0", "tasks/.tmp-<pid>-0 -> tasks/T-1.json"]
    ]
    # Judged on the name itself: a kill that lands is compared with what it landed on.
    assert runs[0][0].target == "tasks/.tmp-4100-0" and runs[1][0].target == "tasks/.tmp-5200-0"


def test_a_threads_process_id_is_read_while_it_lives():
    found: list[frozenset[str]] = []
    thread = threading.Thread(target=lambda: found.append(_process_ids(threading.get_native_id())))
    thread.start()
    thread.join(10)
    assert str(os.getpid()) in found[0] and len(found[0]) == 2  # the thread's own id besides


def test_one_seed_gives_one_reason_where_the_broken_write_names_a_temporary_file(tmp_path, strace):
    """The reference with a receipt only at its end loses its task to a SIGKILL entering
    the temporary file's removal: twice, the reason reads the same (it named the pid)."""
    harness = " ".join([*REFERENCE, "--fault", "final-receipt-only"])
    env = {**os.environ, POINT_ENV: "unlink:1"}  # that point alone: the recording and one kill
    reasons, landed = [], []
    for run in ("first", "second"):
        _, report = certify(tmp_path / run, harness, "--only", "CRASH-POINTS", in_process=True, env=env)
        scenario = by_id(report)["CRASH-POINTS"]
        assert scenario["status"] == "failed", scenario["reason"]
        reasons.append(scenario["reason"])
        [point] = scenario["evidence"]["points"]
        landed.append((point["target"], point["landed_on"], point["landed_as_recorded"]))
    assert reasons[0] == reasons[1]
    assert "a SIGKILL entering unlink #1 on tasks/.tmp-<pid>-0: list_tasks holds 2 tasks" in reasons[0]
    assert landed == 2 * [("tasks/.tmp-<pid>-0", "tasks/.tmp-<pid>-0", True)]
