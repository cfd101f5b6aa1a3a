"""The Python API of the reference runtime, where a subprocess would add nothing:
the records on disk, what each path costs in fsyncs, numbering, locks, reports."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from reference_client import snapshot

from retryproof.reference_impl import WRITE_TASK_FAILPOINTS, Runtime
from retryproof.reference_impl import journal as journal_module
from retryproof.reference_impl.locking import LockTimeout, hold
from retryproof.reference_impl.numbering import Numbering
from retryproof.spec import validator
from retryproof.spec.digest import ContractError
from retryproof.spec.protocol import ProtocolError

TASK = {"sender": "PM", "recipient": "DEV", "subject": "Fix login"}


def journal_lines(state_dir) -> list[dict]:
    """Every readable line of the receipt journal, oldest first."""
    lines = []
    for line in (state_dir / "receipts.journal").read_bytes().split(b"\n"):
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


def receipt_lines(state_dir, submission_id: str) -> list[dict]:
    """Every state line of one receipt in the journal, oldest first."""
    return [line for line in journal_lines(state_dir) if line.get("client_submission_id") == submission_id]


def receipt_on_disk(state_dir, submission_id: str) -> dict:
    return receipt_lines(state_dir, submission_id)[-1]


def assert_valid(schema: str, instance: dict) -> None:
    errors = [error.message for error in validator(schema).iter_errors(instance)]
    assert not errors, (schema, errors, instance)


@pytest.mark.parametrize(
    ("failpoint", "state"),
    [
        ("write_task.after_reserve", "reserved"),
        ("write_task.after_task_created", "task_created"),
        ("write_task.after_commit", "committed"),
    ],
)
def test_each_receipt_state_on_disk_is_a_valid_receipt(state_dir, failpoint, state):
    with pytest.raises(OSError):
        Runtime(state_dir, {failpoint: "fail"}).write_task(TASK, "sub-1")
    lines = receipt_lines(state_dir, "sub-1")
    states = ["reserved", "task_created", "committed"]
    assert [line["state"] for line in lines] == states[: states.index(state) + 1]
    for receipt in lines:
        assert_valid("receipt", receipt)
        assert ("result" in receipt) is (receipt["state"] == "committed")


def test_the_stored_result_is_the_creation_even_when_a_retry_commits_it(state_dir):
    with pytest.raises(OSError):
        Runtime(state_dir, {"write_task.after_task_write": "fail"}).write_task(TASK, "sub-1")
    retry = Runtime(state_dir).write_task(TASK, "sub-1")
    assert (retry["disposition"], retry["action_taken"]) == ("reused", False)
    stored = receipt_on_disk(state_dir, "sub-1")["result"]
    assert stored == {**retry, "disposition": "created", "action_taken": True}


def test_results_match_the_creation_result_schema(state_dir):
    runtime = Runtime(state_dir)
    results = [
        runtime.write_task(TASK, "sub-1", {"trace_id": "t-1"}),
        runtime.write_task(TASK, "sub-1", {"trace_id": "t-2", "retry_count": 1}),
        runtime.write_task({**TASK, "subject": "Other"}, "sub-1"),
        runtime.write_task(TASK),
    ]
    assert [result["disposition"] for result in results] == ["created", "reused", "conflict", "created"]
    for result in results:
        assert_valid("creation-result", result)


def test_legacy_calls_make_a_task_each_and_never_claim_idempotence(state_dir):
    runtime = Runtime(state_dir)
    first, second = runtime.write_task(TASK), runtime.write_task(TASK)
    assert first["task_id"] != second["task_id"]
    assert (first["idempotent"], first["client_submission_id"], first["disposition"]) == (False, None, "created")
    assert [task["client_submission_id"] for task in runtime.list_tasks()["tasks"]] == [None, None]
    assert [line for line in journal_lines(state_dir) if "client_submission_id" in line] == []  # claims only


class SyncLog:
    """Every fsync and fdatasync, in order, as (call, path relative to the state dir)."""

    def __init__(self, monkeypatch, state_dir):
        self.calls: list[tuple[str, str]] = []
        for name in ("fsync", "fdatasync"):
            monkeypatch.setattr(os, name, self._logging(name, getattr(os, name), state_dir))

    def _logging(self, name, real, state_dir):
        def logged(fd):
            path = os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), state_dir)
            folder, base = os.path.split(path)
            self.calls.append((name, os.path.join(folder, "<temp>") if base.startswith(".tmp-") else path))
            real(fd)

        return logged


def test_a_creation_syncs_every_stage_in_order_and_a_reuse_syncs_nothing(state_dir, monkeypatch):
    runtime = Runtime(state_dir)
    syncs = SyncLog(monkeypatch, os.path.realpath(state_dir))
    task_id = runtime.write_task(TASK, "sub-1")["task_id"]
    # the journal's name, before its first line; reserved (claiming the task number) and
    # the task object prepared under a hidden name, synced at once; then the object
    # linked under its name; then two states
    assert syncs.calls[:2] == [("fsync", "receipts.journal"), ("fsync", ".")]
    assert set(syncs.calls[2:4]) == {("fdatasync", "receipts.journal"), ("fdatasync", f"tasks/.{task_id}.prepared")}
    assert syncs.calls[4:] == [
        ("fsync", "tasks"),
        ("fdatasync", "receipts.journal"),  # task_created
        ("fdatasync", "receipts.journal"),  # committed
    ]
    assert sorted(os.listdir(state_dir / "tasks")) == [f"{task_id}.json"]  # the hidden name is gone
    before, syncs.calls = snapshot(state_dir), []
    assert runtime.write_task(TASK, "sub-1")["disposition"] == "reused"
    assert syncs.calls == []
    assert snapshot(state_dir) == before


def test_a_start_syncs_nothing_and_the_first_writer_makes_the_journal_name_durable(state_dir, monkeypatch):
    """The journal's name must be durable before its first line (a power cut could
    otherwise drop the file with an acknowledged state in it); a start that never
    writes, such as a harness answering hello, need not wait for the disk for that."""
    Runtime(state_dir)  # made the directories (and synced the state directory)
    syncs = SyncLog(monkeypatch, os.path.realpath(state_dir))
    runtime = Runtime(state_dir)  # the journal is there and empty
    runtime.diagnose("sub-0", 0)
    assert syncs.calls == []
    runtime.write_task(TASK, "sub-1")
    assert syncs.calls[:2] == [("fsync", "receipts.journal"), ("fsync", ".")]
    assert ("fsync", ".") not in syncs.calls[2:]
    syncs.calls = []
    Runtime(state_dir).write_task(TASK, "sub-2")  # another process: the journal has lines
    assert ("fsync", "receipts.journal") not in syncs.calls and ("fsync", ".") not in syncs.calls


def test_a_retry_in_another_process_syncs_the_prepared_object_before_publishing_it(state_dir, monkeypatch):
    """The crashed process may have died between writing the prepared object and its
    sync: a SIGKILL keeps the page cache, a power cut afterwards would not."""
    with pytest.raises(OSError):
        Runtime(state_dir, {"write_task.after_reserve": "fail"}).write_task(TASK, "sub-1")
    retrying = Runtime(state_dir)  # another process: it did not sync that object itself
    syncs = SyncLog(monkeypatch, os.path.realpath(state_dir))
    task_id = retrying.write_task(TASK, "sub-1")["task_id"]
    assert syncs.calls == [
        ("fdatasync", f"tasks/.{task_id}.prepared"),
        ("fsync", "tasks"),
        ("fdatasync", "receipts.journal"),
        ("fdatasync", "receipts.journal"),
    ]
    assert sorted(os.listdir(state_dir / "tasks")) == [f"{task_id}.json"]


@pytest.mark.parametrize(
    "tear",
    [
        pytest.param(lambda line: line[:40], id="SIGKILL inside the write: no newline"),
        pytest.param(lambda line: line[:40] + b"\0" * 20 + line[60:], id="power cut: a lost sector, newline kept"),
        pytest.param(lambda line: b"\0" * 30, id="power cut: the size landed, the data did not"),
    ],
)
def test_a_journal_line_cut_short_by_a_crash_leaves_the_state_before_it(state_dir, tear):
    with pytest.raises(OSError):
        Runtime(state_dir, {"write_task.after_task_created": "fail"}).write_task(TASK, "sub-1")
    committed = json.dumps({**receipt_lines(state_dir, "sub-1")[-1], "state": "committed"}).encode() + b"\n"
    with open(state_dir / "receipts.journal", "ab") as journal:
        journal.write(tear(committed))
    runtime = Runtime(state_dir)
    assert runtime.diagnose("sub-1", 0)["state"] == "task_created"
    assert runtime.write_task(TASK, "sub-1")["disposition"] == "reused"
    assert [line["state"] for line in receipt_lines(state_dir, "sub-1")] == ["reserved", "task_created", "committed"]
    assert {"cut_short": True} in journal_lines(state_dir)
    assert Runtime(state_dir).write_task(TASK, "sub-1")["disposition"] == "reused"  # a fresh reader agrees
    assert len(runtime.list_tasks()["tasks"]) == 1


def test_the_line_closing_off_a_cut_short_one_is_synced_before_the_record_after_it(state_dir, monkeypatch):
    """Written and synced together, a power cut could keep the record and lose part of
    the closing line, and an unreadable line followed by a readable one reads as damage."""
    with pytest.raises(OSError):
        Runtime(state_dir, {"write_task.after_task_created": "fail"}).write_task(TASK, "sub-1")
    with open(state_dir / "receipts.journal", "ab") as journal:
        journal.write(b'{"client_submission_id":"sub-1","st')
    runtime = Runtime(state_dir)
    events = []
    real_write_all, real_fdatasync = journal_module.write_all, os.fdatasync
    monkeypatch.setattr(
        journal_module, "write_all", lambda fd, data, at: events.append(data) or real_write_all(fd, data, at)
    )
    monkeypatch.setattr(os, "fdatasync", lambda fd: events.append("fdatasync") or real_fdatasync(fd))
    assert runtime.write_task(TASK, "sub-1")["disposition"] == "reused"
    assert events[:2] == [b'\n{"cut_short":true}\n', "fdatasync"]
    assert b'"committed"' in events[2] and events[3] == "fdatasync"
    assert Runtime(state_dir).write_task(TASK, "sub-1")["disposition"] == "reused"  # a fresh reader agrees


def test_a_damaged_journal_line_is_an_io_error_never_an_absent_receipt(state_dir):
    """A crash cuts short only the last line, and the next writer marks it; an
    unreadable line with others after it is damage. Read as absent, a receipt would
    let the retry create a second task."""
    Runtime(state_dir).write_task(TASK, "sub-1")
    journal = state_dir / "receipts.journal"
    journal.write_bytes(journal.read_bytes().replace(b'"state":"reserved"', b'"state:"reserved"', 1))
    runtime = Runtime(state_dir)
    for call in (lambda: runtime.diagnose("sub-1", 0), lambda: runtime.write_task(TASK, "sub-2")):
        with pytest.raises(OSError) as raised:
            call()
        assert raised.value.errno == errno.EIO
    assert len(runtime.list_tasks()["tasks"]) == 1


def test_runtimes_sharing_a_state_directory_claim_distinct_numbers_and_read_each_others_receipts(state_dir):
    """Each Runtime has its own journal descriptor and index, as separate processes do."""
    runtimes = [Runtime(state_dir) for _ in range(4)]
    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(lambda index: runtimes[index % 4].write_task(TASK, f"sub-{index}"), range(40)))
        legacy = list(pool.map(lambda index: runtimes[index % 4].write_task(TASK), range(8)))
    numbers = sorted(int(result["task_id"].removeprefix("TASK-")) for result in created + legacy)
    assert numbers == list(range(1, 49))
    for index, first in enumerate(created):
        again = runtimes[(index + 1) % 4].write_task(TASK, f"sub-{index}")
        assert (again["disposition"], again["task_id"]) == ("reused", first["task_id"])


def test_a_retry_that_words_the_task_differently_stores_its_own_wording(state_dir):
    # The retry after a crash has the first call's digest in another wording (CRLF).
    with pytest.raises(OSError):
        Runtime(state_dir, {"write_task.after_reserve": "fail"}).write_task({**TASK, "body": "a\r\nb"}, "sub-1")
    runtime = Runtime(state_dir)
    retry = runtime.write_task({**TASK, "body": "a\nb"}, "sub-1")
    assert (retry["disposition"], retry["action_taken"]) == ("created", True)
    assert runtime.read_task(retry["task_id"])["task"]["body"] == "a\nb"


def test_a_committed_reuse_does_not_wait_for_the_lock_of_its_id(state_dir):
    runtime = Runtime(state_dir, wait_timeout_s=0.05)
    runtime.write_task(TASK, "sub-1")
    with hold(str(state_dir / "receipt-locks" / "sub-1.lock"), 1.0):
        assert runtime.write_task(TASK, "sub-1")["disposition"] == "reused"
    with hold(str(state_dir / "receipt-locks" / "sub-2.lock"), 1.0):
        with pytest.raises(ProtocolError) as waited:
            runtime.write_task(TASK, "sub-2")  # a new id must wait for its holder
    assert waited.value.code == "in_progress"
    assert runtime.diagnose("sub-2", 0)["state"] == "absent"


def test_threads_of_one_process_exclude_each_other(state_dir):
    path = str(state_dir / "one.lock")
    with hold(path, 1.0):
        outcome = []
        thread = threading.Thread(target=lambda: outcome.append(_try_hold(path)))
        thread.start()
        thread.join()
    assert outcome == ["timeout"]
    assert _try_hold(path) == "held"


def test_a_thread_waiting_for_another_thread_is_handed_the_lock_without_polling(state_dir, monkeypatch):
    # Polling pauses are for holders in other processes; a burst of same-id calls on one
    # connection would otherwise be answered one pause at a time.
    from retryproof.reference_impl import locking

    pauses = []
    real_sleep = locking.time.sleep
    monkeypatch.setattr(locking.time, "sleep", lambda seconds: pauses.append(seconds) or real_sleep(seconds))
    path, waiting, outcome = str(state_dir / "one.lock"), threading.Event(), []
    with hold(path, 1.0):
        thread = threading.Thread(target=lambda: (waiting.set(), outcome.append(_try_hold(path, 5.0))))
        thread.start()
        waiting.wait(1.0)
        threading.Event().wait(0.05)  # the waiter is now blocked on the lock
    thread.join()
    assert outcome == ["held"]
    assert pauses == []


def _try_hold(path: str, timeout_s: float = 0.05) -> str:
    try:
        with hold(path, timeout_s):
            return "held"
    except LockTimeout:
        return "timeout"


def test_numbers_claimed_by_racing_threads_are_unique_and_contiguous(tmp_path):
    numbering = [Numbering(str(tmp_path)) for _ in range(4)]  # four independent claimers
    with ThreadPoolExecutor(8) as pool:
        claimed = list(pool.map(lambda index: numbering[index % 4].claim(), range(200)))
    assert sorted(claimed) == list(range(1, 201))


def test_a_fresh_claimer_finds_the_end_of_a_long_prefix_without_a_scan(tmp_path, monkeypatch):
    for number in range(1, 1001):
        (tmp_path / str(number)).touch()
    probes = Counter()
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda path: probes.update(["exists"]) or real_exists(path))
    assert Numbering(str(tmp_path)).claim() == 1001
    assert probes["exists"] <= 2 * 11  # galloping then bisection: about 2 log2(1000)


def test_reports_deduplicate_by_submission_id(state_dir):
    runtime = Runtime(state_dir)
    task_id = runtime.write_task(TASK, "sub-1")["task_id"]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: runtime.write_report("rep-1", task_id, "done"), range(8)))
    assert Counter(answer["deduplicated"] for answer in answers) == {False: 1, True: 7}
    assert len({answer["report_id"] for answer in answers}) == 1
    assert runtime.list_reports() == {"reports": [{"report_id": answers[0]["report_id"], "task_id": task_id}]}
    before = snapshot(state_dir)
    with pytest.raises(ContractError) as other_content:
        runtime.write_report("rep-1", task_id, "something else")
    assert other_content.value.code == "invalid_request"
    with pytest.raises(ProtocolError) as unknown_task:
        runtime.write_report("rep-2", "TASK-999999", "done")
    assert unknown_task.value.code == "not_found"
    assert snapshot(state_dir) == before


def test_a_receipt_whose_task_path_leaves_the_tasks_directory_is_refused(state_dir):
    runtime = Runtime(state_dir)
    runtime.write_task(TASK, "sub-1")
    receipt = receipt_on_disk(state_dir, "sub-1")
    for escape in ("../../outside.json", "receipts.journal", "/etc/passwd"):
        with open(state_dir / "receipts.journal", "a") as journal:
            journal.write(json.dumps({**receipt, "task_path": escape}) + "\n")
        with pytest.raises(OSError, match="leaves the tasks directory"):
            runtime.diagnose("sub-1", 1)


def test_read_task_accepts_only_task_ids(state_dir):
    runtime = Runtime(state_dir)
    created = runtime.write_task(TASK, "sub-1")
    assert runtime.read_task(created["task_id"])["task"] == TASK
    for bad in ("../receipts/sub-1", "TASK-1", "receipts", 7):
        with pytest.raises(ProtocolError) as missing:
            runtime.read_task(bad)
        assert missing.value.code == "not_found"


def test_a_missing_state_directory_is_refused(tmp_path):
    with pytest.raises(NotADirectoryError):
        Runtime(tmp_path / "nowhere")


def test_invocation_must_be_an_object(state_dir):
    with pytest.raises(ContractError) as bad:
        Runtime(state_dir).write_task(TASK, "sub-1", invocation="t-1")
    assert bad.value.code == "invalid_request"
    assert (state_dir / "receipts.journal").read_bytes() == b""


def test_the_failpoint_names_are_the_spec_ones():
    from retryproof.spec import load_spec

    assert set(WRITE_TASK_FAILPOINTS) == {
        name for name in load_spec()["protocol_spec"]["failpoints"] if name.startswith("write_task.")
    }


def test_one_bounded_wait_inside_the_kits_call_timeout(state_dir):
    # The API, the command line and the approval locks share it; the spec's decision
    # names 5 s for the reference, half the kit's default call timeout.
    import subprocess
    import sys

    from retryproof.reference_impl.runtime import WAIT_TIMEOUT_S

    assert WAIT_TIMEOUT_S == 5.0
    assert Runtime(state_dir).wait_timeout_s == WAIT_TIMEOUT_S
    usage = subprocess.run(
        [sys.executable, "-m", "retryproof.reference_impl", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert f"(default {WAIT_TIMEOUT_S}," in " ".join(usage.split())


def test_the_served_listing_reads_each_task_file_once(tmp_path, monkeypatch):
    """The HTTP and MCP listing (key and stored task per effect) used to read every task
    file twice: once to list it, once more for its task."""
    from retryproof.reference_impl import runtime as runtime_module
    from retryproof.reference_impl.served import listing

    service = Runtime(str(tmp_path))
    for number in range(3):
        service.write_task({**TASK, "subject": f"task {number}"}, f"sub-{number}")
    reads: list[str] = []
    real = runtime_module._read_bytes
    monkeypatch.setattr(runtime_module, "_read_bytes", lambda path: reads.append(path) or real(path))
    listed = listing(service)["tasks"]
    assert len(listed) == 3 and all(entry["task"]["subject"].startswith("task ") for entry in listed)
    task_reads = [path for path in reads if os.sep + "tasks" + os.sep in path]
    assert len(task_reads) == len(set(task_reads)) == 3, reads
