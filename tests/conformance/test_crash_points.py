"""CRASH-POINTS' reading of a trace: which system calls are points, how strace's
per-thread count names each, which change nothing, the even sample past the cap, and
the park-then-kill on a real traced process."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from kit import STDLIB_PYTHON, by_id, certify, failed_start

from retryproof.adapters.process import ProcessConnection
from retryproof.conformance.options import REFERENCE_COMMAND
from retryproof.conformance.scenarios import crash_points
from retryproof.conformance.scenarios.crash_points import (
    Point,
    _durable_entries,
    _Killer,
    _same_target,
    _same_targets,
    failure_reason,
    find_points,
    sample,
)
from retryproof.conformance.strace import Follower, NthEntry, entered, tracing_options
from retryproof.spec.protocol import Success

ROOT = "/state"


def nth_entry(text, name, when):
    return NthEntry(name, when).read(text.encode())


def _found(lines, began=10.0, ended=20.0, own_port=None):
    return find_points(entered(lines), ROOT, began, ended, own_port)


def _points(lines, began=10.0, ended=20.0, own_port=None):
    found = _found(lines, began, ended, own_port)
    return found.points, found.unreachable


def test_the_durable_calls_of_the_write_are_points_and_nothing_else():
    points, unreachable = _points(
        [
            '7 5.0 openat(AT_FDCWD</w>, "/state/boot", O_WRONLY|O_CREAT, 0666) = 3</state/boot>',  # before the write
            '7 11.0 openat(AT_FDCWD</w>, "/state/a.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</state/a.tmp>',
            '7 11.1 openat(AT_FDCWD</w>, "/state/a", O_RDONLY) = 4</state/a>',  # a read
            '7 11.2 write(3</state/a.tmp>, "{}", 2) = 2',
            '7 11.3 write(2<pipe:[1]>, "log", 3) = 3',  # stderr
            '7 11.4 rename("/state/a.tmp", "/state/a") = 0',
            '7 11.5 sendto(4<TCP:[127.0.0.1:8000->127.0.0.1:5000]>, "HTTP/1.1 201", 12, 0, NULL, 0) = 12',  # its caller
            '7 11.6 sendto(5<TCP:[127.0.0.1:41000->127.0.0.1:6379]>, "SET k v", 7, 0, NULL, 0) = 7',  # its store
            '7 11.7 write(6<UNIX-STREAM:[1->2]>, "x", 1) = 1',  # an anonymous socket pair
            '7 11.8 unlinkat(AT_FDCWD</w>, "/tmp/other", 0) = 0',  # outside the state
        ],
        own_port=8000,
    )
    assert unreachable == 0
    assert [(p.syscall, p.when, p.target) for p in points] == [
        ("openat", 2, "a.tmp"),
        ("write", 1, "a.tmp"),
        ("rename", 1, "a.tmp -> a"),
        ("sendto", 2, "tcp 127.0.0.1:6379"),
    ]


def test_a_point_another_thread_would_pre_empt_is_counted_on_its_path():
    """Thread 7 opens files at start-up; the write's thread 9 opens its first: when=1
    would kill thread 7 early, so the point is counted on its path (strace -P)."""
    points, unreachable = _points(
        [
            '7 5.0 openat(AT_FDCWD</w>, "/lib/x.so", O_RDONLY) = 3</lib/x.so>',
            '9 11.0 openat(AT_FDCWD</w>, "/state/a.tmp", O_WRONLY|O_CREAT, 0666) = 3</state/a.tmp>',
            '9 11.1 write(3</state/a.tmp>, "{}", 2) = 2',
        ]
    )
    assert points == [Point("openat", 1, "a.tmp", "a.tmp"), Point("write", 1, "a.tmp")]
    assert points[0].strace_options("/state")[:2] == ["-P", "/state/a.tmp"]
    assert points[1].strace_options("/state") == ["-e", "trace=write", "-e", "inject=write:signal=KILL:when=1"]
    assert points[1].strace_options("/state", park_us=5) == [
        "-e",
        "trace=write",
        "-e",
        "inject=write:delay_enter=5:when=1",
    ]
    assert unreachable == 0


def test_a_point_on_a_path_named_after_its_process_is_unreachable():
    """Another thread pre-empts the count, and the path names process 9's pid: in the
    next process the file has another name, so neither count would ever trigger."""
    points, unreachable = _points(
        [
            '7 5.0 openat(AT_FDCWD</w>, "/lib/x.so", O_RDONLY) = 3</lib/x.so>',
            '9 11.0 openat(AT_FDCWD</w>, "/state/.tmp-9-0", O_WRONLY|O_CREAT, 0666) = 3</state/.tmp-9-0>',
            '9 11.1 openat(AT_FDCWD</w>, "/state/task-1", O_WRONLY|O_CREAT, 0666) = 4</state/task-1>',
        ]
    )
    assert points == [Point("openat", 2, "task-1")]
    assert unreachable == 1


def test_the_data_a_write_carries_is_never_taken_for_a_path():
    """A SQLite WAL frame looks like a relative name to strace's quoting; read as a path
    under the file's own, it made a point named by binary bytes, which no reproduce line
    can carry (the report was invalid). Thread 7's earlier write pre-empts both counts
    of thread 9's, so no point is left to kill at: it is counted as unreachable."""
    points, unreachable = _points(
        [
            '7 5.0 pwrite64(3</state/db-wal>, "a", 1, 0) = 1',
            r'9 11.0 pwrite64(4</state/db-wal>, "\r\0\0\1/\f\327", 6, 32) = 6',
        ]
    )
    assert (points, unreachable) == ([], 1)


def test_an_interrupted_call_is_a_point_where_it_was_entered():
    points, _ = _points(
        [
            '9 11.0 write(3</state/a>, "12", 2 <unfinished ...>',
            '7 11.1 write(4</state/b>, "3", 1) = 1',
            "9 11.2 <... write resumed>) = 2",
        ]
    )
    assert [p.target for p in points] == ["a", "b"]


def test_settling_waits_on_the_calls_that_are_points_only(tmp_path):
    """The recording and every kill-phase start settle on the same calls: a runtime's
    log lines on stderr and its answers on its own port are no points, so a runtime
    that logs twice a second still goes quiet. Before, a kill-phase start counted
    every call of the point's syscall and waited out its whole bound."""
    state = tmp_path / "state"
    state.mkdir()
    trace = tmp_path / "trace"
    trace.write_text(
        '7 10.000001 write(2<pipe:[99]>, "starting\\n", 9) = 9\n'
        '7 10.000002 write(4<TCP:[127.0.0.1:8000->127.0.0.1:5000]>, "HTTP/1.1 200", 12) = 12\n'
        f'7 10.000003 write(5<{state}/journal>, "x", 1) = 1\n'
        '7 10.000004 write(6<TCP:[127.0.0.1:6000->127.0.0.1:6379]>, "SET", 3) = 3\n'
        '7 10.000005 write(2<pipe:[99]>, "ready'
    )
    follower = Follower(str(trace))
    assert _durable_entries(follower, str(state), 8000) == [10.000003, 10.000004]
    with trace.open("a") as handle:
        handle.write(f'\\n", 6) = 6\n7 10.000006 write(5<{state}/journal>, "y", 1) = 1\n')
    assert _durable_entries(follower, str(state), 8000) == [10.000006]  # only what is new


def test_points_past_the_cap_are_sampled_evenly_keeping_the_first_and_the_last():
    points = [Point("write", n, f"f{n}") for n in range(1, 51)]
    chosen = sample(points, 24)
    assert len(chosen) == 24 and chosen[0] == points[0] and chosen[-1] == points[-1]
    assert len(set(chosen)) == 24
    assert sample(points[:5], 24) == points[:5]


def broken(when: int, killed: bool, landed_on: str | None = "tasks/x") -> dict:
    landed = killed and landed_on == "tasks/x"
    return {"syscall": "openat", "when": when, "target": "tasks/x", "killed": killed, "outcome": "2 tasks"} | {
        "landed_on": landed_on if killed else None,
        "landed_as_recorded": landed,
    }


def test_a_failure_names_first_a_point_whose_kill_landed():
    """A point whose kill never landed broke a completed write: it names no crash window."""
    reason = failure_reason([broken(1, killed=False), broken(2, killed=True)], 10)
    assert reason == (
        "2 of 10 crash points broke the write (1 of them where the kill did not land: the write completed, "
        "then its retry broke); first, a SIGKILL entering openat #2 on tasks/x: 2 tasks"
    )
    assert failure_reason([broken(1, killed=True)], 3) == (
        "1 of 3 crash points broke the write; first, a SIGKILL entering openat #1 on tasks/x: 2 tasks"
    )
    only_unlanded = failure_reason([broken(4, killed=False)], 3)
    assert "first, the retry after a write whose kill at openat #4 on tasks/x did not land" in only_unlanded


def test_a_failure_names_a_kill_on_the_recorded_call_before_one_that_landed_elsewhere():
    elsewhere, recorded = broken(1, killed=True, landed_on="tasks/y"), broken(2, killed=True)
    assert "first, a SIGKILL entering openat #2 on tasks/x: 2 tasks" in failure_reason([elsewhere, recorded], 4)
    assert "first, a SIGKILL entering openat #1 on tasks/x (it landed on tasks/y): 2 tasks" in failure_reason(
        [elsewhere], 4
    )


def test_removals_the_trace_cannot_resolve_forget_every_file_and_creat_truncates():
    """A relative name without a directory descriptor may have removed any file; a
    renameat's second name belongs to its second descriptor; creat() empties the file."""
    found = _found(
        [
            '7 11.0 openat(AT_FDCWD</state>, "j.lock", O_RDWR|O_CREAT, 0644) = 3</state/j.lock>',
            '7 11.1 unlink("j.lock") = 0',  # the working directory is not in the trace
            '7 11.2 openat(AT_FDCWD</state>, "j.lock", O_RDWR|O_CREAT, 0644) = 3</state/j.lock>',
            '7 11.3 openat(AT_FDCWD</state>, "a/f", O_RDWR|O_CREAT, 0644) = 3</state/a/f>',
            '7 11.4 renameat(4</state/a>, "f", 5</state/b>, "f") = 0',
            '7 11.5 openat(AT_FDCWD</state>, "a/f", O_RDWR|O_CREAT, 0644) = 3</state/a/f>',
            '7 11.6 creat("/state/c", 0644) = 3</state/c>',
            '7 11.7 creat("/state/c", 0644) = 3</state/c>',
        ]
    )
    assert found.redundant == []
    assert "renameat:1" in [p.name for p in found.points]
    assert next(p.target for p in found.points if p.syscall == "renameat") == "a/f -> b/f"


def test_a_re_open_of_a_file_the_trace_created_is_redundant_and_a_new_creation_is_not():
    """The reference's journal lock is opened with O_CREAT on every write: only its
    first open creates it. A directory made during the write, a file re-created after
    an unlink, a re-open that truncates and a file first met under O_CREAT stay points."""
    found = _found(
        [
            '7 5.0 openat(AT_FDCWD</w>, "/state/old", O_RDONLY) = 3</state/old>',  # met, not created: unproven
            '7 11.0 mkdir("/state/tasks", 0777) = 0',
            '7 11.1 openat(AT_FDCWD</w>, "/state/j.lock", O_RDWR|O_CREAT, 0644) = 3</state/j.lock>',
            '7 11.2 openat(AT_FDCWD</w>, "/state/j.lock", O_RDWR|O_CREAT, 0644) = 4</state/j.lock>',
            '7 11.3 openat(AT_FDCWD</w>, "/state/j.lock", O_RDWR|O_CREAT|O_TRUNC, 0644) = 4</state/j.lock>',
            '7 11.4 unlink("/state/j.lock") = 0',
            '7 11.5 openat(AT_FDCWD</w>, "/state/j.lock", O_RDWR|O_CREAT, 0644) = 4</state/j.lock>',
            '7 11.6 rename("/state/tasks", "/state/done") = 0',
            '7 11.7 openat(AT_FDCWD</w>, "/state/old", O_RDWR|O_CREAT, 0644) = 4</state/old>',
        ]
    )
    assert [p.name for p in found.points] == [
        "mkdir:1",
        "openat:2",
        "openat:4",
        "unlink:1",
        "openat:5",
        "rename:1",
        "openat:6",
    ]
    assert [p.name for p in found.redundant] == ["openat:3"]


def test_a_file_created_before_the_write_makes_its_re_open_redundant_until_renamed_away():
    found = _found(
        [
            '7 5.0 mkdir("/state/tasks", 0777) = 0',  # start-up, before the write
            '7 5.1 openat(AT_FDCWD</w>, "/state/tasks/a", O_WRONLY|O_CREAT, 0644) = 3</state/tasks/a>',
            '7 11.0 openat(AT_FDCWD</w>, "/state/tasks/a", O_WRONLY|O_CREAT, 0644) = 3</state/tasks/a>',
            '7 11.1 rename("/state/tasks", "/state/old") = 0',
            '7 11.2 openat(AT_FDCWD</w>, "/state/tasks/a", O_WRONLY|O_CREAT, 0644) = -1 ENOENT (No such file)',
        ]
    )
    assert [p.name for p in found.redundant] == ["openat:2"]
    assert [p.name for p in found.points] == ["rename:1", "openat:3"]


def test_the_parked_entry_is_the_threads_nth_call_still_unfinished():
    done = '7 pwrite64(3</s/j>, "1", 1, 0) = 1\n'
    assert nth_entry(done + '9 pwrite64(3</s/j>, "2", 1, 1', "pwrite64", 2) is None  # thread 9's first
    parked = nth_entry(done + '7 pwrite64(3</s/j>, "2", 1, 1', "pwrite64", 2)
    assert (parked.call.pid, parked.call.args, parked.finished, parked.running) == (
        7,
        '3</s/j>, "2", 1, 1',
        False,
        True,
    )
    assert [(e.pid, e.args) for e in parked.earlier] == [(7, '3</s/j>, "1", 1, 0')]
    cut = done + '7 pwrite64(3</s/j>, "2", 1, 1 <unfinished ...>\n9 write(1, "x", 1) = 1\n'
    assert nth_entry(cut, "pwrite64", 2).finished is False
    assert nth_entry(done + '7 pwrite64(3</s/j>, "2", 1, 1) = 1\n', "pwrite64", 2).finished is True
    assert nth_entry(done + "7 pwri", "pwrite64", 2) is None
    # Killed in the call, as strace wrote it when it saw the kill before it died too.
    killed = nth_entry(done + '7 pwrite64(3</s/j>, "2", 1, 1) = ?\n7 +++ killed by SIGKILL +++\n', "pwrite64", 2)
    assert (killed.finished, killed.ended, killed.exited, killed.running) == (False, True, False, False)


#: strace -f -q of a process whose thread 31 was blocked in its second write (a full
#: pipe) when thread 30 called exit_group, as strace 6.1 wrote it.
EXIT_GROUP = """\
31 1.10 write(4<pipe:[15]>, "xxxx"..., 65536) = 65536
31 1.11 write(4<pipe:[15]>, "xxxx"..., 65536 <unfinished ...>
32 1.12 +++ exited with 0 +++
31 1.41 <... write resumed>) = ?
31 1.42 +++ exited with 0 +++
30 1.43 +++ exited with 0 +++
"""


def test_a_call_a_thread_was_in_when_exit_group_ended_it_is_no_kill(tmp_path):
    """``= ?`` says the thread ended in the call, not how: with ``-q`` strace says it
    exited (another thread's exit_group), and that call is neither parked nor where a kill
    landed. Read as killed, it was taken as the point's kill: a start that then ended was
    the kill's, not strace's, and the point counted as tested."""
    entry = nth_entry(EXIT_GROUP, "write", 2)
    assert (entry.finished, entry.ended, entry.exited, entry.running) == (False, True, True, False)
    # Until strace says how the thread ended, it is taken as killed there (-qq says nothing).
    cut = EXIT_GROUP[: EXIT_GROUP.index("31 1.42")]
    assert (nth_entry(cut, "write", 2).ended, nth_entry(cut, "write", 2).exited) == (True, False)
    # Cut by another thread's line, then resumed with its result: it finished.
    resumed = EXIT_GROUP.replace("<... write resumed>) = ?", "<... write resumed>) = 65536")
    assert nth_entry(resumed, "write", 2).finished is True
    # The killer's reading after the run: no kill landed on it; on a killed one, one did.
    trace = tmp_path / "trace"
    trace.write_text(EXIT_GROUP)
    assert _Killer(str(trace), Point("write", 2, "(not a point)"), 1).landed(str(tmp_path), None) is None
    trace.write_text(EXIT_GROUP.replace("31 1.42 +++ exited with 0 +++", "31 1.42 +++ killed by SIGKILL +++"))
    landed = _Killer(str(trace), Point("write", 2, "(not a point)"), 1).landed(str(tmp_path), None)
    assert landed is not None and landed.at == 1.11


def test_the_parked_entry_read_piece_by_piece_is_the_one_read_whole():
    """The killer reads only what strace wrote since its last poll: cut anywhere, even
    inside a line or a character, the trace read in two pieces names the same entry as
    read whole, at both reads."""
    trace = (
        '7 1.0 pwrite64(3</s/j>, "é", 2, 0) = 2\n'
        '9 1.1 pwrite64(4</s/k>, "1", 1, 0 <unfinished ...>\n'
        '7 1.2 write(1, "x", 1) = 1\n'
        "9 1.3 <... pwrite64 resumed>) = 1\n"
        '7 1.5 pwrite64(3</s/j>, "3", 1, 2'
    ).encode()
    for when in (1, 2, 3):
        for cut in range(len(trace) + 1):
            watch = NthEntry("pwrite64", when)
            assert watch.read(trace[:cut]) == NthEntry("pwrite64", when).read(trace[:cut]), (when, cut)
            assert watch.read(trace[cut:]) == NthEntry("pwrite64", when).read(trace), (when, cut)
    parked = NthEntry("pwrite64", 2).read(trace)
    assert (parked.call.pid, parked.call.args, parked.finished) == (7, '3</s/j>, "3", 1, 2', False)


def test_a_point_remembers_what_its_threads_earlier_calls_acted_on():
    """Thread 9's second write is the point: its first went to the log pipe. Counted on
    a path (thread 7 pre-empts the count), only the earlier calls on that path count."""
    points, _ = _points(
        [
            '9 11.0 write(2<pipe:[77]>, "log", 3) = 3',
            '9 11.1 write(3</state/a>, "1", 1) = 1',
            '7 11.2 openat(AT_FDCWD</w>, "/state/b", O_WRONLY|O_CREAT, 0644) = 4</state/b>',
            '7 11.3 openat(AT_FDCWD</w>, "/state/c", O_WRONLY|O_CREAT, 0644) = 5</state/c>',
            '9 11.4 openat(AT_FDCWD</w>, "/state/d", O_WRONLY|O_CREAT, 0644) = 6</state/d>',
            '9 11.5 openat(AT_FDCWD</w>, "/state/d", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 6</state/d>',
        ]
    )
    assert [(p.name, p.before) for p in points] == [
        ("write:2", ("pipe:[77]",)),
        ("openat:1", ()),
        ("openat:2", ("b",)),
        ("openat:1:d", ()),
        ("openat:2:d", ("d",)),
    ]


def test_a_kill_on_the_recorded_target_by_another_threads_path_is_not_the_point():
    """The same target reached after other calls is another thread's path (a background
    flush reaching the count first, say): its crash state is not the point's."""
    assert _same_targets(("pipe:[77]", "tasks/.tmp-41"), ("pipe:[12]", "tasks/.tmp-97"))
    assert not _same_targets(("pipe:[77]",), ("journal",))
    assert not _same_targets(("journal",), ("journal", "journal"))
    outcome = broken(2, killed=True) | {"landed_as_recorded": False, "thread_as_recorded": False}
    assert "(it landed on tasks/x, in a thread whose earlier calls differ)" in failure_reason([outcome], 3)


def test_a_kill_landed_on_the_recorded_call_up_to_the_names_that_differ_from_run_to_run():
    """A pid, a random temporary name, a generated id: the matrix's Powertools run named
    its temporary file ``.tmp-_c6krmor`` recording and ``.tmp-w9fx3mkj`` when killed."""
    assert _same_target("tasks/.tmp-41-0", "tasks/.tmp-97-0")
    assert _same_target(
        "tasks/.tmp-93yz_trd -> tasks/T-6da4478b9c8b41e3.json", "tasks/.tmp-_c6krmor -> tasks/T-0aa1b2c3d4e5f607.json"
    )
    assert _same_target("tasks/.tmp-abcdefgh", "tasks/.tmp-zyxwvuts")  # a random name without a digit
    assert _same_target(  # uuids, one group of the first without a digit (nestjs in the matrix)
        "tasks/.tmp-efb1c159-fb90-4473-bdcc-dda937e8864f", "tasks/.tmp-e22dcb15-508f-4a1b-9148-4f677fb87970"
    )
    assert not _same_target("tasks/a.json", "tasks/a.lock")
    assert not _same_target("tasks/x.json", "receipts/x.json")
    assert not _same_target("tcp 127.0.0.1:6379", "prefect/locks")
    assert not _same_target("tasks/a", None)


def test_a_kill_on_a_socket_landed_on_the_recorded_one_only_at_the_same_ends(monkeypatch):
    """Two stores on one host are two targets: before, every word of ``tcp
    127.0.0.1:6391`` held a digit, so any two TCP peers were "the same". A port the kernel
    hands out (a client's end, the matrix's Restate run: peer 48304 recording, 35848
    killed) differs from run to run and matches another such port."""
    monkeypatch.setattr(crash_points, "_ephemeral_ports", lambda: (32768, 60999))
    assert _same_target("tcp 127.0.0.1:6391", "tcp 127.0.0.1:6391")
    assert not _same_target("tcp 127.0.0.1:6391", "tcp 127.0.0.1:6392")  # two redis servers
    assert not _same_target("tcp 127.0.0.1:5432", "tcp 10.0.0.7:5432")
    assert not _same_target("tcp 127.0.0.1:6379", "tcp [::1]:6379")
    assert _same_target("tcp 127.0.0.1:48304", "tcp 127.0.0.1:35848")  # a client's ends
    assert not _same_target("tcp 127.0.0.1:6391", "tcp 127.0.0.1:48304")
    assert not _same_target("tcp 127.0.0.1:6391", "unix /run/redis.sock")
    # As a thread's earlier calls name them (``_what``): both ends.
    to_redis = "TCP:[127.0.0.1:40000->127.0.0.1:6392]"
    assert _same_target(to_redis, "TCP:[127.0.0.1:51234->127.0.0.1:6392]")
    assert not _same_target(to_redis, "TCP:[127.0.0.1:40000->127.0.0.1:6391]")
    accepted = "TCP:[127.0.0.1:9080->127.0.0.1:40000]"  # a server's accepted connection
    assert _same_target(accepted, "TCP:[127.0.0.1:9080->127.0.0.1:51234]")
    assert not _same_target(accepted, "TCP:[127.0.0.1:9081->127.0.0.1:51234]")
    assert _same_targets((to_redis, "journal"), ("TCP:[127.0.0.1:33333->127.0.0.1:6392]", "journal"))
    assert not _same_targets((to_redis,), ("TCP:[127.0.0.1:33333->127.0.0.1:6391]",))


FIVE_WRITES = """
import os, sys, threading
def go():
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    for n in range(5):
        os.pwrite(fd, b"%d" % n, n)
thread = threading.Thread(target=go)
thread.start()
thread.join()
"""


def test_a_parked_call_is_killed_before_it_runs(tmp_path, strace):
    """A thread's second pwrite64, parked under the seccomp filter where strace has it,
    is killed with its group before it runs: the file holds the first write alone."""
    target, trace = tmp_path / "data", tmp_path / "trace"
    point = Point("pwrite64", 2, "data")
    inject = point.strace_options(str(tmp_path), park_us=30_000_000)
    command = [strace, *tracing_options(strace), "-ttt", "-y", *inject, "-o", str(trace), "--"]
    started = time.time()
    process = subprocess.Popen([*command, sys.executable, "-S", "-c", FIVE_WRITES, str(target)], start_new_session=True)
    try:
        with _Killer(str(trace), point, 30) as killer:
            process.wait(30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait(10)
    assert killer.killed and process.returncode == -9
    assert target.read_bytes() == b"0"
    target_, earlier, at = killer.landed(str(tmp_path), None)
    assert (target_, earlier) == ("data", ("data",))  # the first write's file too
    assert started <= at <= time.time()  # when it was entered, to tell an entry before the write


def _strace_shy(tmp_path, lose: str, times: int) -> str:
    harness = Path(__file__).with_name("strace_shy_harness.py")
    return f"{STDLIB_PYTHON} {harness} {tmp_path / 'lost'} {shlex.quote(lose)} {times} {shlex.join(REFERENCE_COMMAND)}"


def test_a_start_lost_under_strace_is_tried_once_more_not_skipped(tmp_path, strace):
    """A runtime whose first start under strace fails (as strace 6.1 loses a
    multithreaded one's now and then) is still judged: that recording or point is run
    again on a fresh scratch, and the evidence says so. Skipping at once made the same
    seed's CRASH-POINTS pass in one matrix run and skip in the next. At one point of the
    write (``POINT_ENV``): the lost start is the recording's, before any point, and each
    of the others cost a traced start."""
    shy = _strace_shy(tmp_path, " -ttt ", 1)  # the recording's first start
    one_point = {**os.environ, crash_points.POINT_ENV: "pwrite64:1"}
    done, report = certify(tmp_path / "out", shy, "--only", "CRASH-POINTS", in_process=True, env=one_point)
    scenario = by_id(report)["CRASH-POINTS"]
    assert scenario["status"] == "passed", done.stdout
    (failed_once,) = scenario["evidence"]["traced_starts_failed_once"]
    assert failed_once.endswith("lost under strace")
    assert scenario["evidence"]["points_not_started"] == []


def test_a_harness_start_lost_while_its_wrapper_lives_on_ends_the_handshake_at_once(tmp_path):
    """strace 6.1 lost a traced start and lived on, holding the harness's pipes: the
    handshake waited its whole bound (6 x 10 s under CRASH-POINTS). A harness whose
    command ends at start under a wrapper that lives on (``lives_on.py``) fails its start
    at once, as one that exits does without a wrapper, and CRASH-POINTS tries it again."""
    lives_on = Path(__file__).parents[1] / "bindings" / "lives_on.py"
    command = [sys.executable, "-S", str(lives_on), sys.executable, "-S", "-c", "import sys; sys.exit(3)"]
    state = tmp_path / "state"
    state.mkdir()
    failed, took = failed_start(ProcessConnection(command, str(state), start_timeout=60, wrapped=True))
    assert took < 3.0
    assert "ended while python lived on" in failed.message
    assert "delayed wait data set already" in (failed.stderr or "")


#: A harness launcher that forks the harness (which keeps the pipes) and ends at once;
#: the harness says hello only 1 s later.
FORKS_THE_HARNESS = """
import os, sys, time
if os.fork():
    os._exit(0)
time.sleep(1.0)
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_a_harness_a_launcher_forked_under_strace_is_waited_for_not_lost(tmp_path, strace):
    """strace -f lives on after the launcher, its child, ends: it traces the harness,
    which runs, so its start is no lost one though its hello comes after the grace."""
    options = [strace, *tracing_options(strace), "-o", str(tmp_path / "trace"), "--"]
    command = [*options, sys.executable, "-S", "-c", FORKS_THE_HARNESS, *REFERENCE_COMMAND]
    state = tmp_path / "state"
    state.mkdir()
    connection = ProcessConnection(command, str(state), start_timeout=60, wrapped=True)
    try:
        connection.start()
        reply = connection.call("list_tasks", {})
    finally:
        connection.kill()
    assert isinstance(reply, Success) and reply.result["tasks"] == [], reply


def test_a_point_lost_twice_under_strace_is_named_and_the_others_judged(tmp_path, strace):
    """Both starts of the point at the journal's first write are lost: that point is
    named as not started, and the points that ran (two at a time) decide the verdict.
    Before, the whole scenario was skipped (Restate-binding: 24 points judged, one lost
    twice)."""
    shy = _strace_shy(tmp_path, r"inject=pwrite64:\S*:when=1 ", 2)
    done, report = certify(tmp_path / "out", shy, "--only", "CRASH-POINTS", in_process=True)
    scenario = by_id(report)["CRASH-POINTS"]
    assert scenario["status"] == "passed", done.stdout
    evidence = scenario["evidence"]
    (lost,) = evidence["points_not_started"]
    assert lost["point"] == "pwrite64:1"
    assert lost["point"] not in {outcome["point"] for outcome in evidence["points"]}
    assert len(evidence["points"]) == evidence["points_run"] - 1
    assert all(outcome["landed_as_recorded"] and outcome["thread_as_recorded"] for outcome in evidence["points"])


def test_a_kill_on_the_recorded_file_reached_by_another_threads_path_is_landed_elsewhere(tmp_path, strace):
    """In the kill runs another thread reaches the journal's second pwrite64 first, after
    a write to another file: the kill lands on the recorded target, in a thread whose
    earlier call differs, so the point is listed as landed elsewhere, not as tested."""
    harness = f"{STDLIB_PYTHON} {Path(__file__).with_name('other_thread_harness.py')} during-the-write"
    done, report = certify(tmp_path / "out", harness, "--only", "CRASH-POINTS", in_process=True)
    scenario = by_id(report)["CRASH-POINTS"]
    evidence = scenario["evidence"]
    outcomes = {outcome["point"]: outcome for outcome in evidence["points"]}
    second = outcomes["pwrite64:2"]
    assert (second["killed"], second["landed_on"], second["thread_as_recorded"]) == (True, "receipts.journal", False)
    assert second["landed_as_recorded"] is False and second["landed_before_the_write"] is False
    assert outcomes["pwrite64:1"]["landed_on"] == "background.log"
    assert set(evidence["points_landed_elsewhere"]) == {"pwrite64:1", "pwrite64:2"}
    # The other points (on other calls, or counted on a path) landed as recorded and pass.
    assert scenario["status"] == "passed", done.stdout
    assert all(o["landed_as_recorded"] for name, o in outcomes.items() if name not in ("pwrite64:1", "pwrite64:2"))


def test_a_kill_on_a_call_entered_before_the_write_was_sent_is_landed_elsewhere(tmp_path, strace):
    """In the kill runs another thread makes the journal's first two pwrite64 calls, on
    the recorded targets in the recorded order, before the harness serves: the kills
    land before the write is sent, a crash state of the start, never the points'."""
    harness = f"{STDLIB_PYTHON} {Path(__file__).with_name('other_thread_harness.py')} at-start"
    done, report = certify(tmp_path / "out", harness, "--only", "CRASH-POINTS", in_process=True)
    scenario = by_id(report)["CRASH-POINTS"]
    evidence = scenario["evidence"]
    outcomes = {outcome["point"]: outcome for outcome in evidence["points"]}
    for name in ("pwrite64:1", "pwrite64:2"):
        early = outcomes[name]
        assert (early["killed"], early["landed_on"], early["thread_as_recorded"]) == (True, "receipts.journal", True)
        assert early["landed_before_the_write"] is True and early["landed_as_recorded"] is False
    assert set(evidence["points_landed_elsewhere"]) == {"pwrite64:1", "pwrite64:2"}
    assert scenario["status"] == "passed", done.stdout
    others = [outcome for name, outcome in outcomes.items() if name not in ("pwrite64:1", "pwrite64:2")]
    assert all(o["landed_as_recorded"] and not o["landed_before_the_write"] for o in others)


def test_without_the_seccomp_filter_strace_injects_each_kill_on_its_recorded_call(tmp_path, strace, monkeypatch):
    """Where strace has no ``--seccomp-bpf`` nothing is parked: strace's injected SIGKILL
    kills, and each of the reference's points is killed on its recorded call, after the
    write was sent, and passes."""
    monkeypatch.setattr(crash_points, "tracing_options", lambda strace: ("-f", "-q"))
    done, report = certify(tmp_path / "out", shlex.join(REFERENCE_COMMAND), "--only", "CRASH-POINTS", in_process=True)
    scenario = by_id(report)["CRASH-POINTS"]
    assert scenario["status"] == "passed", done.stdout
    evidence = scenario["evidence"]
    assert evidence["kill"] == "strace signal=KILL at entry"
    assert evidence["points_run"] == len(evidence["points"]) > 0
    assert all(o["killed"] and o["landed_as_recorded"] for o in evidence["points"])
    assert not any(o["landed_before_the_write"] for o in evidence["points"])


def test_a_point_named_by_its_thread_can_be_chosen_by_its_path_too():
    """A start that compiled a module (its bytecode renamed into place by thread 7) names
    the write's rename by its path; a run whose start found the bytecode cached names it
    by the thread's count. The path's name chooses the same call in both."""
    pyc = '7 5.0 rename("/cache/m.pyc.1", "/cache/m.pyc") = 0'
    write = '9 11.0 rename("/state/e.tmp", "/state/e") = 0'
    cold, warm = _found([pyc, write]), _found([write])
    assert [p.name for p in cold.points] == ["rename:1:e.tmp"]
    assert [p.name for p in warm.points] == ["rename:1"]
    assert warm.on_their_paths == cold.points
    assert cold.on_their_paths == []
