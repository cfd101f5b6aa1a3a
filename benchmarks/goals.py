"""Every speed goal in one table: the goal, today's figure, and the floor it is measured
against, all measured in this one run, so the next measurement is one command.

    python benchmarks/goals.py [--rounds N] [--receipts 1000,100000] [--suite]

Run it with the interpreter of the environment to measure (its ``retryproof`` script is
what is timed, as a user starts it). The kit's runs are timed from spawn to exit through
the command line, not through the runner's Python API, so the figure is what a user waits
for. Runs of one round are interleaved (harness run, each binding, selftest), so a machine
shared with other work slows them alike; read each figure beside its floor of the same
run. ``--suite`` adds the README's test command (minutes; it is left out by default).
The create, burst and reuse rows come from ``bench_protocol.py`` and the start row from
``bench_start.py``, each run once here with ``--json``.

A goal's floor is what the figure cannot go below with the same work:

- a run of the catalogue: its longest scenario (``--jobs`` cannot split one scenario);
- a binding run: the same catalogue through the harness (what the transport adds is the
  rest); selftest: the reference's own run;
- create: the SQLite runtime that keeps the same four durable states (``bench_protocol.py``,
  "staged"); start: an interpreter that has imported json and threading.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from tabulate import tabulate

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.dirname(HERE)
#: Bound on one timed command; a hung run is a finding, not a reason to wait forever.
TIMEOUT_S = 900.0
BINDINGS = {"reference-http": 5.0, "reference-mcp": 10.0, "reference-mcp-http": 10.0}


def kit() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "retryproof")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "retryproof.conformance.cli"]


def timed(argv: Sequence[str], cwd: str | None = None) -> float:
    """Wall seconds of ``argv`` from spawn to exit; a run that fails is not a figure."""
    began = time.perf_counter()
    done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: " + " / ".join(tail))
    return seconds


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the kit's runs (default 3)")
    parser.add_argument("--receipts", default="1000,100000", help="stored receipts for the reuse rows")
    parser.add_argument("--suite", action="store_true", help="also time the README's test command")
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    floors: list[float] = []
    with tempfile.TemporaryDirectory(prefix="goals-") as scratch:
        for round_number in range(args.rounds):
            out = os.path.join(scratch, f"run-{round_number}")
            runs = {"harness run": [*kit(), "run", "--seed", "1", "--format", "json", "--out", out]}
            for binding in BINDINGS:
                runs[binding] = [*kit(), "run", "--binding", binding, "--seed", "1", "--format", "json"]
                runs[binding] += ["--out", os.path.join(scratch, f"{binding}-{round_number}")]
            runs["selftest"] = [*kit(), "selftest", "--seed", "1", "--out", os.path.join(scratch, f"st-{round_number}")]
            for name, argv in runs.items():
                samples.setdefault(name, []).append(timed(argv))
            floors.append(longest_scenario(os.path.join(out, "report.json")))
        if args.suite:
            samples["suite"] = [timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], REPOSITORY)]
    run_s = {name: statistics.median(values) for name, values in samples.items()}
    protocol = bench("bench_protocol.py", "--rounds", "60", "--receipts", args.receipts)
    start = bench("bench_start.py", "--rounds", "15")
    harness = run_s["harness run"]
    rows = []
    if args.suite:
        rows.append(["README test command", "<= 90 s", f"{run_s['suite']:.0f} s", "-", verdict(run_s["suite"] <= 90)])
    rows.append(
        [
            "harness run of the reference",
            "<= 3 s",
            f"{harness:.1f} s",
            f"{statistics.median(floors):.1f} s (longest scenario)",
            verdict(harness <= 3),
        ]
    )
    rows.append(
        [
            "selftest",
            "<= 8 s",
            f"{run_s['selftest']:.1f} s",
            f"{harness:.1f} s (reference run)",
            verdict(run_s["selftest"] <= 8),
        ]
    )
    for binding, goal in BINDINGS.items():
        rows.append(
            [
                f"binding run, {binding}",
                f"<= {goal:.0f} s",
                f"{run_s[binding]:.1f} s",
                f"{harness:.1f} s (harness run)",
                verdict(run_s[binding] <= goal),
            ]
        )
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
    rows.append(
        [
            "harness start, reference / floor",
            "<= 1.30x",
            f"{harness_start / start[floor_name]:.2f}x ({harness_start * 1e3:.0f} ms)",
            f"{start[floor_name] * 1e3:.0f} ms (json + threading)",
            verdict(harness_start / start[floor_name] <= 1.3),
        ]
    )
    print(tabulate(rows, headers=["goal", "target", "now", "floor", ""], tablefmt="github"))
    print(
        f"\n{args.rounds} interleaved rounds, seed 1; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
        f"interpreter {sys.executable}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
