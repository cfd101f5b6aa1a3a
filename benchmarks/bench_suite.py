"""Where the README's test command spends its time: every test's wall and CPU seconds,
summed per file, and the longest test (no run on N workers can end before it does).

    python benchmarks/bench_suite.py [--top 25] [--by wall|cpu] [--json FILE] [--processes] [PYTEST_ARGS...]

Runs ``pytest -q -p no:cacheprovider`` (the README's command, on its xdist workers)
with this file loaded as a plugin in every worker; extra arguments go to pytest (a
file, ``-n 2``, ``-k``). Wall seconds summed over tests are worker-seconds: on a loaded
machine they grow with the load, while CPU seconds (the test's process and every
process it started and reaped: kit runs, harnesses, servers) grow much less, so read
both (``--by cpu`` ranks files and tests by CPU, the figure to compare across loads).
The file table's "of it in worker" column is the part of a file's CPU spent in the pytest
worker itself (in-process kit runs, Hypothesis, collection of a test's fixtures); the
rest is in the processes its tests started, so it says which of the two to cut.
A process a worker keeps for several tests is counted in no test, only in the
command's total once the worker has reaped it: the headless Chromium that renders
every page of a worker's tests (tests/conformance/headless_chromium.py).
The wall time of the whole command is printed too; it is the goal's figure only on a
quiet machine. ``--processes`` (root: it uses the kernel's process accounting,
``processes.py``) adds the census of every process the command started, by kind
(starts, CPU per start, in all) and, for the costliest kinds, the tests that started
them. Exit: pytest's; 2 when the census cannot run (no root, accounting already on, records
not of version 3), 128+n on SIGTERM or SIGHUP.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpu import cpu_seconds
from processes import Census, Process, descendants, kind, parents, table
from tabulate import tabulate

from retryproof.conformance.errors import KitError

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent
#: The file each worker appends one JSON line per test to (set by main()).
OUT_ENV = "RETRYPROOF_BENCH_SUITE_OUT"
#: How long an interrupted pytest gets to end its workers and what they started.
INTERRUPTED_BOUND_S = 30


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Setup, call and teardown of one test, as the plugin of each worker sees them."""
    began, (own, reaped), at = time.perf_counter(), cpu_seconds(), time.time()
    yield
    own_after, reaped_after = cpu_seconds()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = {
        "test": item.nodeid,
        "wall_s": time.perf_counter() - began,
        "cpu_s": own_after + reaped_after - own - reaped,
        "own_cpu_s": own_after - own,
        "at": at,
        "worker": worker,
        "pid": os.getpid(),
    }
    with open(os.environ[OUT_ENV], "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def summary(lines: list[dict], top: int, by: str = "wall") -> str:
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for line in lines:
        totals = files[line["test"].split("::")[0]]
        totals[0] += line["wall_s"]
        totals[1] += line["cpu_s"]
        totals[2] += line["own_cpu_s"]
        totals[3] += 1
    column = 2 if by == "wall" else 3
    rows = sorted(
        ([name, n, f"{wall:.1f}", f"{cpu:.1f}", f"{own:.1f}"] for name, (wall, cpu, own, n) in files.items()),
        key=lambda row: -float(row[column]),
    )
    ranked = sorted(lines, key=lambda line: -line[f"{by}_s"])[:top]
    longest = max(lines, key=lambda line: line["wall_s"])
    wall = sum(line["wall_s"] for line in lines)
    cpu = sum(line["cpu_s"] for line in lines)
    own = sum(line["own_cpu_s"] for line in lines)
    return "\n\n".join(
        [
            f"{len(lines)} tests: {wall:.0f} worker-seconds, {cpu:.0f} CPU-seconds ({own:.0f} in the workers); "
            f"longest test {longest['wall_s']:.1f} s ({longest['test']})\n" + _workers(lines),
            tabulate(rows[:top], headers=["file", "tests", "wall s", "cpu s", "of it in worker"]),
            tabulate(
                [[line["test"], f"{line['wall_s']:.1f}", f"{line['cpu_s']:.1f}"] for line in ranked],
                headers=["test", "wall s", "cpu s"],
            ),
        ]
    )


def _workers(lines: list[dict]) -> str:
    """When each worker ran its last test to its end, from the first test's start: the
    spread between the first and the last is time a worker stood idle (the run's tail)."""
    start = min(line["at"] for line in lines)
    ends: dict[str, float] = {}
    for line in lines:
        ends[line["worker"]] = max(ends.get(line["worker"], 0.0), line["at"] + line["wall_s"] - start)
    last = max(lines, key=lambda line: line["at"] + line["wall_s"])
    return (
        "workers done at "
        + ", ".join(f"{name} {end:.0f} s" for name, end in sorted(ends.items()))
        + f"; the last test to end: {last['test']} ({last['wall_s']:.1f} s)"
    )


def census_summary(started: list[Process], lines: list[dict], top: int, cpu: float) -> str:
    """The processes by kind, and for each of the costliest kinds the tests whose
    worker started them (or their ancestors) while the test ran."""
    argv = {process.pid: process.argv for process in started}
    tests: dict[int, list[dict]] = defaultdict(list)
    for line in lines:
        tests[line["pid"]].append(line)
    parent = parents(started)

    def test_of(process: Process) -> str:
        step: Process | None = process
        while step is not None and step.ppid not in tests:
            step = parent(step)
        if step is None:
            return "(no test: the session, a worker, collection)"
        ran = [
            line for line in tests[step.ppid] if line["at"] - 0.1 <= process.born <= line["at"] + line["wall_s"] + 0.1
        ]
        return ran[-1]["test"] if ran else "(a worker, between tests)"

    rows = table(started, top)
    total = sum(process.cpu for process in started)
    spent: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for process in started:
        where = spent[kind(process, argv.get(process.ppid))][test_of(process)]
        where[0] += 1
        where[1] += process.cpu
    parts = [
        f"{len(started)} processes, {total:.0f} CPU-s by process accounting ({cpu:.0f} by RUSAGE_CHILDREN)\n"
        + tabulate(rows, headers=["kind", "starts", "cpu s", "cpu s/start", "wall s/start"])
    ]
    for name, *_ in rows[:10]:
        costliest = sorted(spent[name].items(), key=lambda item: -item[1][1])[:5]
        parts.append(
            f"{name}:\n"
            + "\n".join(f"  {int(n):4d} starts {cpu_s:6.1f} CPU-s  {test}" for test, (n, cpu_s) in costliest)
        )
    return "\n\n".join(parts)


def _bytecode() -> str:
    """Where the run's processes cached what they compiled. With PYTHONDONTWRITEBYTECODE
    set (CI sets it) and no PYTHONPYCACHEPREFIX, the test session caches it under a
    temporary prefix of its own (tests/conftest.py): without that, every process (each
    worker, kit run, harness and pytest session a test starts) compiled from source every
    module of the kit, which an editable install leaves uncompiled. Measured on 2 CPUs: a
    kit run of two scenarios 0.61 CPU-s uncached, 0.46-0.52 cached; collecting the suite
    3.2 CPU-s uncached, 0.9 cached, once per worker."""
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return f"bytecode: cached under PYTHONPYCACHEPREFIX={os.environ['PYTHONPYCACHEPREFIX']}"
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return "bytecode: cached as usual, beside the sources"
    return "bytecode: PYTHONDONTWRITEBYTECODE is set; on workers the session caches it under a temporary prefix"


def _run(command: list[str], env: dict[str, str]) -> tuple[str, str, subprocess.Popen]:
    """The pytest command in a process group of its own, which ends with it on any way
    out (Ctrl-C, SIGTERM, SIGHUP): its workers would outlive it and write into a
    scratch folder being removed. Interrupted first, as Ctrl-C would, so the kit in a
    worker ends the harness and server groups it started (each a group of its own, which
    a SIGKILL of pytest's group would leave running); killed only if that takes too long."""
    process = subprocess.Popen(
        command,
        cwd=REPOSITORY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        stdout, stderr = process.communicate()
    except BaseException:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=INTERRUPTED_BOUND_S)
        finally:
            with contextlib.suppress(ProcessLookupError):  # the group's last member gone
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        raise
    return stdout, stderr, process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="files and tests to list (default 25)")
    parser.add_argument("--by", choices=("wall", "cpu"), default="wall", help="rank files and tests by (default wall)")
    parser.add_argument(
        "--json",
        help="also keep every test's line (JSON lines) in this file, pytest's output in FILE.out (a failure's "
        "traceback, which the summary does not print) and every process in FILE.processes",
    )
    parser.add_argument("--processes", action="store_true", help="and every process it started, by kind (root)")
    args, pytest_args = parser.parse_known_args()
    for number in (signal.SIGTERM, signal.SIGHUP):  # end through the finally blocks: scratch removed
        signal.signal(number, lambda number, _: sys.exit(128 + number))
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as scratch:
        out = Path(args.json or Path(scratch) / "tests.jsonl").resolve()
        out.write_text("", encoding="utf-8")
        env = {
            **os.environ,
            OUT_ENV: str(out),
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "bench_suite", *pytest_args]
        census = Census(Path(scratch)) if args.processes else contextlib.nullcontext()
        began, cpu, at = time.perf_counter(), cpu_seconds()[1], time.time()
        try:
            with census:
                stdout, stderr, pytest_process = _run(command, env)
            elapsed, cpu = time.perf_counter() - began, cpu_seconds()[1] - cpu
            started = descendants(census.processes(), pytest_process.pid, at) if isinstance(census, Census) else []
        except KitError as exc:  # no root, accounting already on, records of another version
            print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
            return exc.exit_code
        done = subprocess.CompletedProcess(command, pytest_process.returncode, stdout, stderr)
        lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line]
        if args.json:
            Path(f"{args.json}.out").write_text(stdout + stderr, encoding="utf-8")
        if started and args.json:
            with open(f"{args.json}.processes", "w", encoding="utf-8") as kept:
                kept.writelines(json.dumps(dataclasses.asdict(process)) + "\n" for process in started)
    ends = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    print("\n".join([*ends, *done.stdout.strip().splitlines()[-1:]]) if done.stdout.strip() else done.stderr[-2000:])
    print(
        f"the command: {elapsed:.0f} s wall, {cpu:.0f} CPU-s (with what no test counts: start-up, collection), "
        f"load average {os.getloadavg()[0]:.1f} at its end"
    )
    if lines:
        first = min(line["at"] for line in lines) - at
        last = max(line["at"] + line["wall_s"] for line in lines) - at
        # The head (start-up, collection, workers starting) and the tail (teardown, xdist
        # ending its workers) are wall time in which no test runs.
        print(f"the tests ran from {first:.1f} s to {last:.1f} s of it: {elapsed - last:.1f} s after the last one")
    print(_bytecode() + "\n")
    if lines:
        print(summary(lines, args.top, args.by))
    if started:
        print("\n" + census_summary(started, lines, args.top, cpu))
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
