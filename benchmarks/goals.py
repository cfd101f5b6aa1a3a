"""Every speed goal in one table: the goal, today's figure, and the floor it is measured
against, all measured in this one run, so the next measurement is one command.

    python benchmarks/goals.py [--rounds N] [--receipts 1000,100000] [--suite]
                               [--kit-only] [--against PYTHON]

Run it with the interpreter of the environment to measure (its ``retryproof`` script is
what is timed, as a user starts it). The kit's runs are timed from spawn to exit through
the command line, not through the runner's Python API, so the figure is what a user waits
for. Runs of one round are interleaved (harness run, each binding, selftest), so a machine
shared with other work slows them alike; read each figure beside its floor of the same
run. Each kit figure is its wall time and, in brackets, the CPU seconds of it and the
processes it waited for: the figure a loaded machine changes least (on N CPUs a run takes
at least that over N). ``--suite`` adds the README's test command (minutes; it is left out by default).
The create, burst and reuse rows come from ``bench_protocol.py`` and the start row from
``bench_start.py``, each run once here with ``--json`` (``--kit-only`` leaves them out).
The start goal is stated for a wheel install; in an editable one the row says so and is not
judged (build a wheel, ``pip wheel --no-deps .``, into a fresh venv and run this there).

``--against PYTHON`` also times the kit's runs in another environment (a checkout of the
branch a change starts from, say), each run of a round right after this one's, and adds
its figures as a column: a before and after in one load condition.

A goal's floor is what the figure cannot go below with the same work:

- a run of the catalogue: its longest scenario (``--jobs`` cannot split one scenario) or
  its CPU seconds over the CPUs, whichever is more; the README's test command: the latter;
- a binding run: the same catalogue through the harness (what the transport adds is the
  rest); selftest: the reference's own run;
- create: the SQLite runtime that keeps the same four durable states (``bench_protocol.py``,
  "staged"); start: an interpreter that has imported json and threading.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import NamedTuple

import bytecode
from cpu import cpu_seconds
from tabulate import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.dirname(HERE)
#: Bound on one timed command; a hung run is a finding, not a reason to wait forever.
TIMEOUT_S = 900.0
CPUS = os.cpu_count() or 1
BINDINGS = {"reference-http": 5.0, "reference-mcp": 10.0, "reference-mcp-http": 10.0}


def kit(python: str = sys.executable) -> list[str]:
    script = os.path.join(os.path.dirname(python), "retryproof")
    return [script] if os.access(script, os.X_OK) else [python, "-m", "retryproof.conformance.cli"]


class Timing(NamedTuple):
    wall: float
    #: User and system seconds of the command and of every process it waited for (its
    #: harnesses and servers): on a machine shared with other work, the figure load
    #: changes least, and on N CPUs the run takes at least cpu / N.
    cpu: float

    def __str__(self) -> str:
        return f"{self.wall:.1f} s ({self.cpu:.1f} CPU-s)"


def timed(argv: Sequence[str], cwd: str | None = None) -> Timing:
    """``argv`` from spawn to exit; a run that fails is not a figure."""
    began, used = time.perf_counter(), cpu_seconds()[1]
    done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds, spent = time.perf_counter() - began, cpu_seconds()[1]
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: " + " / ".join(tail))
    return Timing(seconds, spent - used)


def median(values: list[Timing]) -> Timing:
    return Timing(statistics.median(value.wall for value in values), statistics.median(value.cpu for value in values))


def longest_scenario(report: str) -> float:
    with open(report, encoding="utf-8") as handle:
        return max(scenario.get("duration_s") or 0.0 for scenario in json.load(handle)["scenarios"])


def bench(script: str, *argv: str) -> dict:
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, script), *argv, "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if done.returncode != 0:
        raise SystemExit(f"{script} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def kit_runs() -> dict[str, list[str]]:
    """The kit's timed runs, by row name, without ``--out``."""
    runs = {"harness run": ["run", "--seed", "1", "--format", "json"]}
    for binding in BINDINGS:
        runs[binding] = ["run", "--binding", binding, "--seed", "1", "--format", "json"]
    runs["selftest"] = ["selftest", "--seed", "1"]
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the kit's runs (default 3)")
    parser.add_argument("--receipts", default="1000,100000", help="stored receipts for the reuse rows")
    parser.add_argument("--suite", action="store_true", help="also time the README's test command")
    parser.add_argument("--kit-only", action="store_true", help="only the kit's runs: no create, reuse or start rows")
    parser.add_argument(
        "--against", metavar="PYTHON", help="also time the kit's runs with this environment's interpreter"
    )
    args = parser.parse_args()
    environments = {"now": sys.executable, **({"against": args.against} if args.against else {})}
    samples: dict[str, dict[str, list[Timing]]] = {environment: {} for environment in environments}
    floors: list[tuple[float, float]] = []  # (longest scenario, CPU / CPUs) per round
    with tempfile.TemporaryDirectory(prefix="goals-") as scratch:
        for round_number in range(args.rounds):
            for name, argv in kit_runs().items():
                for environment, python in environments.items():
                    out = os.path.join(scratch, f"{environment}-{round_number}", name.replace(" ", "-"))
                    samples[environment].setdefault(name, []).append(timed([*kit(python), *argv, "--out", out]))
            longest = longest_scenario(os.path.join(scratch, f"now-{round_number}", "harness-run", "report.json"))
            floors.append((longest, samples["now"]["harness run"][-1].cpu / CPUS))
        if args.suite:
            suite = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            samples["now"]["suite"] = [timed(suite, REPOSITORY)]
    medians = {
        environment: {name: median(values) for name, values in runs.items()} for environment, runs in samples.items()
    }
    timings = medians["now"]
    run_s = {name: timing.wall for name, timing in timings.items()}
    harness = run_s["harness run"]
    rows: list[tuple[str, list[str]]] = []  # (the kit run it times, or "", the row)
    if args.suite:
        rows.append(
            (
                "",
                [
                    "README test command",
                    "<= 90 s",
                    str(timings["suite"]),
                    f"{timings['suite'].cpu / CPUS:.0f} s (CPU / {CPUS} CPUs)",
                    verdict(run_s["suite"] <= 90),
                ],
            )
        )
    longest, spread = (statistics.median(values) for values in zip(*floors, strict=True))
    floor = f"{longest:.1f} s (longest scenario)" if longest >= spread else f"{spread:.1f} s (CPU / {CPUS} CPUs)"
    rows.append(
        (
            "harness run",
            ["harness run of the reference", "<= 3 s", str(timings["harness run"]), floor, verdict(harness <= 3)],
        )
    )
    selftest = run_s["selftest"]
    reference = f"{harness:.1f} s (reference run)"
    rows.append(("selftest", ["selftest", "<= 8 s", str(timings["selftest"]), reference, verdict(selftest <= 8)]))
    for binding, goal in BINDINGS.items():
        figure, target = str(timings[binding]), f"<= {goal:.0f} s"
        through = f"{harness:.1f} s (harness run)"
        rows.append((binding, [f"binding run, {binding}", target, figure, through, verdict(run_s[binding] <= goal)]))
    if not args.kit_only:
        rows += [("", row) for row in protocol_rows(args.receipts)]
    headers = ["goal", "target", "now", "floor", ""]
    if args.against:
        headers.insert(3, "against")
        for run, row in rows:
            row.insert(3, str(medians["against"][run]) if run else "-")
    print(tabulate([row for _, row in rows], headers=headers, tablefmt="github"))
    print(
        f"\n{args.rounds} interleaved rounds, seed 1; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
        f"interpreter {sys.executable}" + (f", against {args.against}" if args.against else "")
    )
    # Without bytecode every harness start compiles the reference: about half its CPU again.
    stale = bytecode.warning()
    if stale:
        print(stale)
    return 0


def protocol_rows(receipts: str) -> list[list[str]]:
    """The create, burst, reuse and start rows, from ``bench_protocol.py`` and ``bench_start.py``."""
    protocol = bench("bench_protocol.py", "--rounds", "60", "--receipts", receipts)
    start = bench("bench_start.py", "--rounds", "15")
    rows = []
    create = protocol["create_ms"]
    rows.append(
        [
            "create, reference / staged SQLite",
            "<= 0.80x",
            f"{create['reference'] / create['staged']:.2f}x ({create['reference']:.1f} ms)",
            f"{create['staged']:.1f} ms; syncs {protocol['syncs']['reference']} vs {protocol['syncs']['staged']}",
            verdict(create["reference"] / create["staged"] <= 0.8),
        ]
    )
    burst_name = next(name for name in protocol["rows_ms"] if "burst" in name)
    burst = protocol["rows_ms"][burst_name]
    rows.append(
        [burst_name, "<= 50 ms", f"{burst[0]:.1f} ms", f"{burst[1]:.1f} ms (SQLite WAL FULL)", verdict(burst[0] <= 50)]
    )
    reuse = [values for name, values in protocol["rows_ms"].items() if name.startswith("reuse")]
    if len(reuse) > 1:
        flat = reuse[-1][0] / reuse[0][0]
        rows.append(
            [
                "reuse, most / fewest receipts",
                "<= 1.10x",
                f"{flat:.2f}x",
                f"{reuse[-1][1]:.2f} ms (SQLite)",
                verdict(flat <= 1.1),
            ]
        )
    floor_name = next(name for name in start if "json and threading" in name)
    harness_start = next(value for name, value in start.items() if name.startswith("reference harness"))
    editable = editable_install()
    rows.append(
        [
            f"harness start, reference / floor ({'editable' if editable else 'wheel'} install)",
            "<= 1.30x (wheel)",
            f"{harness_start / start[floor_name]:.2f}x ({harness_start * 1e3:.0f} ms)",
            f"{start[floor_name] * 1e3:.0f} ms (json + threading)",
            # An editable install loads its import hook at every start: not the goal's install.
            "not judged" if editable else verdict(harness_start / start[floor_name] <= 1.3),
        ]
    )
    return rows


def editable_install() -> bool:
    """Whether this interpreter's retryproof is an editable install (PEP 610's direct_url.json)."""
    try:
        text = importlib.metadata.distribution("retryproof").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return False
    return bool(text and json.loads(text).get("dir_info", {}).get("editable"))


if __name__ == "__main__":
    sys.exit(main())
