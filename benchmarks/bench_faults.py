"""The fault scenarios over a binding, seed after seed: is the verdict the same every
time, and what does it cost? The services are the test suite's claim services
(``tests/bindings/claim_store.py`` behind ``claim_http.py``, ``claim_stdio.py`` and ``claim_mcp.py``): the
fixed store must pass every scenario aimed at a defect, each broken one must fail them,
on every seed and over every wire.

    python benchmarks/bench_faults.py [--seeds 1-20] [--wires http,mcp-stdio,mcp-http]
        [--services fixed,torn-response,...] [--scenarios KILL-NEMESIS,...]
        [--crash-points-seeds 1-20] [--jobs 2]

Each (wire, service, seed) is one ``retryproof run --binding`` of the scenarios aimed
at the service's defect (for the fixed one: all of them) with ``--call-timeout 3``.
CRASH-POINTS starts the server twice per point, which over MCP streamable HTTP costs
the SDK's import each time; ``--crash-points-seeds`` limits the seeds it runs on (default: all). The
table gives, per wire, service and scenario, the statuses over the seeds, the median
seconds and the crash points found (median). Exit 1 when a service's verdict is not
the expected one on some seed.

This is the sweep behind ``tests/bindings/test_binding_faults.py``, which proves each
verdict once, on seed 1: every defect over HTTP (CRASH-POINTS killing at the point
where the defect lives), and over each MCP wire only what that wire's own code does.
What runs here only: seeds 2-20; CRASH-POINTS at every point for pending-after-kill
and lease-reclaims (HTTP), for every defect over MCP, and for the fixed store over MCP;
cancel-marks-unknown over both MCP wires; pending-after-kill over MCP streamable HTTP;
lease-reclaims over both MCP wires; KILL-NEMESIS on the SDK's streamable HTTP server
(``claim_mcp.py``: the suite runs it on the standard-library ``claim_streamable.py``).
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
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from tabulate import tabulate

REPO = Path(__file__).resolve().parents[1]
# The binding tests' helpers, and tests/kit.py that they import.
sys.path[:0] = [str(REPO / "tests" / "bindings"), str(REPO / "tests")]

from binding_helpers import WIRES, claim_binding  # noqa: E402
from test_binding_faults import CAUGHT_BY  # noqa: E402

ALL = ("A2-RESPONSE-LOSS", "A2-CRASH-BEFORE-RESPONSE", "KILL-NEMESIS", "CRASH-POINTS")


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def one_run(wire: str, service: str, seed: int, scenarios: tuple[str, ...]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as scratch:
        binding = Path(scratch) / "binding.yaml"
        document = claim_binding(wire, "" if service == "fixed" else service)
        binding.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        out = Path(scratch) / "out"
        command = [sys.executable, "-m", "retryproof.conformance.cli", "run", "--binding", str(binding)]
        command += ["--only", ",".join(scenarios), "--seed", str(seed), "--out", str(out), "--format", "json"]
        command += ["--call-timeout", "3", "--start-timeout", "60"]
        began = time.perf_counter()
        subprocess.run(
            command, capture_output=True, timeout=3600, check=False, env={**os.environ, "PYTHONPATH": str(REPO)}
        )
        elapsed = time.perf_counter() - began
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return {
        "wire": wire,
        "service": service,
        "seed": seed,
        "seconds": elapsed,
        "scenarios": {
            s["id"]: (s["status"], s.get("duration_s", 0.0), s["evidence"].get("points_found"))
            for s in report["scenarios"]
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-20")
    parser.add_argument("--crash-points-seeds", default=None, help="seeds CRASH-POINTS runs on (default: --seeds)")
    parser.add_argument("--wires", default=",".join(WIRES))
    parser.add_argument("--services", default=",".join(["fixed", *CAUGHT_BY]))
    parser.add_argument("--scenarios", default=",".join(ALL), help="run only these of the aimed scenarios")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    crash_seeds = set(seeds(args.crash_points_seeds or args.seeds))
    work = []
    for seed in seeds(args.seeds):  # seed by seed, so a partial run covers every service
        for wire in args.wires.split(","):
            for service in args.services.split(","):
                aimed = ALL if service == "fixed" else CAUGHT_BY[service]
                chosen = tuple(
                    s for s in aimed if s in args.scenarios.split(",") and (s != "CRASH-POINTS" or seed in crash_seeds)
                )
                if chosen:
                    work.append((wire, service, seed, chosen))
    began = time.perf_counter()
    runs = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for run in pool.map(lambda item: one_run(*item), work):
            runs.append(run)  # each run as it ends, so an interrupted benchmark still says something
            statuses = ", ".join(f"{sid} {status}" for sid, (status, _, _) in run["scenarios"].items())
            print(f"{run['wire']} {run['service']} seed {run['seed']}: {statuses} ({run['seconds']:.0f}s)", flush=True)
    table = defaultdict(list)
    for run in runs:
        for scenario, found in run["scenarios"].items():
            table[(run["wire"], run["service"], scenario)].append(found)
    for run in runs:  # name every unexpected verdict, so it can be replayed
        expected = "passed" if run["service"] == "fixed" else "failed"
        for scenario, (status, _, _) in run["scenarios"].items():
            if status != expected:
                print(f"unexpected: {run['wire']} {run['service']} {scenario} seed {run['seed']}: {status}")
    rows, wrong = [], 0
    for (wire, service, scenario), found in sorted(table.items()):
        expected = "passed" if service == "fixed" else "failed"
        counts = Counter(status for status, _, _ in found)
        wrong += len(found) - counts[expected]
        points = [p for _, _, p in found if p is not None]
        rows.append(
            (
                wire,
                service,
                scenario,
                f"{counts[expected]}/{len(found)} {expected}",
                ", ".join(f"{n} {status}" for status, n in counts.items() if status != expected) or "-",
                round(statistics.median(seconds for _, seconds, _ in found), 1),
                statistics.median(points) if points else "-",
            )
        )
    print(tabulate(rows, headers=["wire", "service", "scenario", "expected", "other", "median s", "points"]))
    print(
        f"{len(runs)} runs in {time.perf_counter() - began:.0f}s with --jobs {args.jobs}; {wrong} unexpected verdicts"
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
