"""The process census of benchmarks/processes.py without root: its record parser on
crafted records (version 3 read, any other refused), and the kernel's accounting call
replaced by a stand-in that records what it was asked, to show when the census switches
accounting off, when it refuses to switch it on, and that a signal mid-run switches it
off before it ends the run. The real call is the benchmark's, run as root."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import struct
import sys
import time
from pathlib import Path

import pytest

from retryproof.conformance.errors import KitError

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def processes(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import processes

    monkeypatch.setattr(processes, "_KNOWN_FILES", ())  # the test machine's own accounting is not the test's
    return processes


def v3_record(
    pid: int, ppid: int, program: bytes, utime: int = 0, stime: int = 0, flag: int = 0, version: int = 3
) -> bytes:
    """A struct acct_v3 as the kernel writes it on a little-endian machine."""
    return struct.pack(
        "<BBHIIIIIIf8H16s", flag, version, 0, 0, 0, 0, pid, ppid, 1_700_000_000, 250.0, utime, stime, *[0] * 6, program
    )


def test_version_3_records_are_read_field_by_field(processes):
    data = v3_record(41, 1, b"python3", utime=(1 << 13) | 5, stime=7) + v3_record(42, 41, b"sh", flag=0x01)
    first, second = processes.records(data + b"\0" * 10)  # a record cut short at the end is not one
    assert (first.pid, first.ppid, first.program, first.forked_only) == (41, 1, "python3", False)
    assert first.cpu == pytest.approx((5 * 8 + 7) / 100)  # comp_t: mantissa 5, base-8 exponent 1
    assert first.lived == pytest.approx(2.5) and first.born == 1_700_000_000.5
    assert (second.pid, second.ppid, second.program, second.forked_only) == (42, 41, "sh", True)


def test_a_version_2_record_is_refused_not_misread(processes):
    # struct acct (v1/v2): the same 64 bytes, its fields elsewhere; its pid is nowhere.
    v2 = struct.pack("<BBHHHI9HI17sBH2xII", 0, 2, 0, 0, 0, 1_700_000_000, *[0] * 9, 0, b"sh", 0, 0, 0, 0)
    assert len(v2) == 64
    with pytest.raises(KitError, match=r"version 2 at byte 64; the census reads only version 3"):
        processes.records(v3_record(41, 1, b"python3") + v2)


def test_a_big_endian_record_is_refused(processes):
    with pytest.raises(KitError, match=r"version 3 \(big-endian\)"):
        processes.records(v3_record(41, 1, b"python3", version=0x83))


class FakeLibc:
    """acct(2) as the census calls it: each call kept, the answer chosen by the test."""

    def __init__(self, refuse: int = 0) -> None:
        self.calls: list[bytes | None] = []
        self.refuse = refuse

    def acct(self, path: bytes | None) -> int:
        self.calls.append(path)
        if self.refuse:
            ctypes.set_errno(self.refuse)
            return -1
        return 0


def census(processes, folder: Path, libc: FakeLibc, monkeypatch: pytest.MonkeyPatch):
    made = processes.Census(folder)
    made._libc = libc
    # The kernel writes a record as the probe process ends: here the test writes it.
    monkeypatch.setattr(processes, "_exit_one", lambda: made.file.write_bytes(v3_record(7, 1, b"probe")))
    return made


def test_without_the_capability_it_is_a_typed_error_and_nothing_stays_changed(processes, tmp_path, monkeypatch):
    libc = FakeLibc(refuse=errno.EPERM)
    before = {number: signal.getsignal(number) for number in processes._SIGNALS}
    made = census(processes, tmp_path, libc, monkeypatch)
    with pytest.raises(KitError) as raised:
        made.__enter__()
    assert str(raised.value) == "cannot turn on process accounting (acct(2): Operation not permitted)"
    assert "CAP_SYS_PACCT" in (raised.value.hint or "")
    assert libc.calls == [str(tmp_path / "acct").encode(), None]  # off as well, in case the refusal lied
    assert {number: signal.getsignal(number) for number in processes._SIGNALS} == before
    assert not made._thread.is_alive()


def test_accounting_already_running_is_refused_and_left_on(processes, tmp_path, monkeypatch):
    service = tmp_path / "pacct"
    service.write_bytes(b"")
    monkeypatch.setattr(processes, "_KNOWN_FILES", (str(service),))
    libc = FakeLibc()
    made = census(processes, tmp_path, libc, monkeypatch)
    monkeypatch.setattr(processes, "_exit_one", lambda: service.write_bytes(v3_record(7, 1, b"probe")))
    with pytest.raises(KitError, match=f"already on, into {service}"):
        made.__enter__()
    assert libc.calls == []  # neither redirected nor switched off


def test_a_known_file_nobody_writes_is_not_running_accounting(processes, tmp_path):
    stale = tmp_path / "pacct"
    stale.write_bytes(v3_record(7, 1, b"old"))
    assert processes._accounting_elsewhere((str(stale), str(tmp_path / "absent")), exit_one=lambda: None) == []


def test_records_of_another_version_end_the_census_before_the_run(processes, tmp_path, monkeypatch):
    libc = FakeLibc()
    made = census(processes, tmp_path, libc, monkeypatch)
    monkeypatch.setattr(processes, "_exit_one", lambda: made.file.write_bytes(v3_record(7, 1, b"probe", version=2)))
    with pytest.raises(KitError, match="version 2"):
        made.__enter__()
    assert libc.calls[-1] is None


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_mid_run_switches_accounting_off_before_it_ends_the_run(processes, tmp_path, monkeypatch, number):
    libc = FakeLibc()
    made = census(processes, tmp_path, libc, monkeypatch)
    before = signal.getsignal(number)
    with pytest.raises(KeyboardInterrupt if number == signal.SIGINT else SystemExit) as raised:
        with made:
            assert libc.calls == [str(made.file).encode()]
            try:
                os.kill(os.getpid(), number)
                time.sleep(5)  # the handler raises out of it
            except (SystemExit, KeyboardInterrupt):
                assert libc.calls[-1] is None  # off before the run's own way out (__exit__) is reached
                raise
            pytest.fail("the signal did not end the run")
    if number != signal.SIGINT:
        assert raised.value.code == 128 + number
    assert libc.calls == [str(made.file).encode(), None]  # once: the handler's; __exit__ finds it off
    assert signal.getsignal(number) == before
    assert not made._thread.is_alive()


def test_a_normal_end_switches_off_and_reads_the_records(processes, tmp_path, monkeypatch):
    libc = FakeLibc()
    made = census(processes, tmp_path, libc, monkeypatch)
    with made:
        with made.file.open("ab") as kernel:
            kernel.write(v3_record(os.getpid() + 1, os.getpid(), b"child"))
    assert libc.calls == [str(made.file).encode(), None]
    assert [process.program for process in made.processes()] == ["probe", "child"]


def test_bench_suite_prints_the_census_error_and_exits_2(processes, monkeypatch, capsys):
    import bench_suite

    class Refused:
        def __init__(self, folder: Path) -> None:
            pass

        def __enter__(self):
            raise KitError("cannot turn on process accounting (acct(2): Operation not permitted)", "run as root")

        def __exit__(self, *_: object) -> None:
            pass

    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGHUP)}  # main() sets its own
    monkeypatch.setattr(bench_suite, "Census", Refused)
    monkeypatch.setattr(sys, "argv", ["bench_suite.py", "--processes", "-n0", "tests/test_suite_order.py"])
    try:
        assert bench_suite.main() == 2
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)
    assert capsys.readouterr().err == (
        "error: cannot turn on process accounting (acct(2): Operation not permitted)\nhint: run as root\n"
    )
