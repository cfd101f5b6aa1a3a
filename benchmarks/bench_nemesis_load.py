"""KILL-NEMESIS on a loaded machine: does a correct runtime's verdict stay the same?

    python benchmarks/bench_nemesis_load.py [--harness node|reference|mcp] [--busy 6]
        [--jobs 6] [--seeds 1-24] [--evidence FILE]

Starts ``--busy`` busy loops, then runs ``retryproof run --only KILL-NEMESIS`` once per
seed, ``--jobs`` at once, against the reference or the independent Node.js runtime
(``tests/independent/node_harness``) or the reference as an MCP server over stdio, or
the kit's tests' in-process runtime with or without its late record (``IN_PROCESS``), and
prints the statuses, the load before and after, the runtime's starts per run (each
placement is a kill and a start: the scenario's cost), the runs' resolution
(``resolution_ms``: what a pass vouches for) beside the ``late_after_ms`` their counted
kills were allowed, and what counted each effect -> answer round (the trigger of its
counted placement and whether it landed after an effect); ``--evidence`` appends each
run's status, resolution and placements to a file, a JSON line a run, for what the
summary does not say (why a kill came late). Everything runs
at nice 19 in the benchmark's session, so the busy loops compete with the runs (as
CI's parallel runs do) and other work on the machine keeps its share. The busy loops
are ended however the benchmark ends.

A correct runtime must pass on every seed: an error means a round's kill interrupted no
call in any placement (the runtime answered every call first), or came too long after
the effect in every placement that met one, which made a clean runtime's verdict depend
on the machine's load. ``records-late`` must fail on every seed: a pass means no kill
that counted came before its record. Exit 1 on any other status.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from retryproof.conformance.scenarios.kill_nemesis import landed_rounds

REPO = Path(__file__).resolve().parents[1]
NODE = REPO / "tests" / "independent" / "node_harness" / "harness.js"
HARNESSES = {
    "reference": [],
    "node": ["--harness", f"node {NODE}"],
    # The reference as an MCP server over stdio: a server start costs about 0.6 CPU-s.
    "mcp": ["--binding", str(REPO / "adapters" / "bindings" / "reference-mcp.yaml")],
}
#: The kit's tests' in-process runtimes (``tests/conformance/test_kill_nemesis.py``), a
#: process each: ``records-late`` records its effect 10 ms after making it, so it must
#: fail on every seed; ``in-process`` is the same runtime without that defect.
IN_PROCESS = {"records-late": "RecordsAfterEffect", "in-process": "InProcess"}
IN_PROCESS_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
import test_kill_nemesis as runtimes
from retryproof.conformance.context import ScenarioFailed, Unjudgeable
ctx = runtimes.context(int(sys.argv[3]), getattr(runtimes, sys.argv[2]))
try:
    runtimes.kill_nemesis(ctx)
    status, reason = "passed", ""
except ScenarioFailed as failed:
    status, reason = "failed", str(failed)
except Unjudgeable as error:
    status, reason = "error", str(error)
print(json.dumps({"status": status, "reason": reason, "evidence": ctx.evidence}, default=str))
"""
NICE = ["nice", "-n", "19"]


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def one_run(harness: list[str] | str, seed: int, scratch: Path) -> dict:
    if isinstance(harness, str):  # a runtime of the kit's tests, in a process of its own
        tests = str(REPO / "tests" / "conformance")
        command = [*NICE, sys.executable, "-c", IN_PROCESS_RUN, tests, harness, str(seed)]
        return json.loads(subprocess.run(command, capture_output=True, timeout=600, check=True, text=True).stdout)
    out = scratch / f"seed{seed}"
    command = [*NICE, sys.executable, "-m", "retryproof.conformance.cli", "run", *harness]
    command += ["--only", "KILL-NEMESIS", "--seed", str(seed), "--out", str(out), "--format", "json"]
    subprocess.run(command, capture_output=True, timeout=600, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    (scenario,) = json.loads((out / "report.json").read_text(encoding="utf-8"))["scenarios"]
    return scenario


def spread(figures: list[float]) -> str:
    """Least, median, 90th percentile and most of ``figures``, in ms."""
    if not figures:
        return "none"
    ranked = sorted(figures)
    tenth = ranked[min(len(ranked) - 1, int(0.9 * len(ranked)))]
    return f"least {ranked[0]:g}, median {statistics.median(ranked):g}, 90% {tenth:g}, most {ranked[-1]:g} (of {len(ranked)})"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text(encoding="utf-8").split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", choices=(*HARNESSES, *IN_PROCESS), default="node")
    parser.add_argument("--busy", type=int, default=6, help="busy loops beside the runs")
    parser.add_argument("--jobs", type=int, default=6, help="runs at once")
    parser.add_argument("--seeds", default="1-24")
    parser.add_argument(
        "--evidence", type=Path, help="write each run's status and effect -> answer rounds here (JSON lines)"
    )
    args = parser.parse_args()
    # The reference's extra arguments are none: an empty list, so not ``or``.
    harness = HARNESSES[args.harness] if args.harness in HARNESSES else IN_PROCESS[args.harness]
    # In this session, as the runs are: where the kernel groups CPU time by session
    # (autogroup), busy loops in sessions of their own competed with the whole machine
    # rather than with the runs, and the old placement's errors did not show.
    loops = [subprocess.Popen([*NICE, sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # ends through the finally below
    try:
        before = load()
        with tempfile.TemporaryDirectory(prefix="bench-nemesis-") as scratch, ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda seed: (seed, one_run(harness, seed, Path(scratch))), seeds(args.seeds)))
        after = load()
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    statuses = Counter(scenario["status"] for _, scenario in runs)
    schedules = [scenario["evidence"].get("schedule", {}).get("rounds", ()) for _, scenario in runs]
    if args.evidence:
        with args.evidence.open("a", encoding="utf-8") as out:
            for (seed, scenario), rounds in zip(runs, schedules, strict=True):
                line = {"seed": seed, "status": scenario["status"], "reason": scenario.get("reason", "")}
                line["resolution_ms"] = scenario["evidence"].get("resolution_ms")
                out.write(json.dumps({**line, "rounds": [round_["attempts"] for round_ in rounds]}) + "\n")
    counted: Counter[str] = Counter()
    for (seed, scenario), rounds in zip(runs, schedules, strict=True):
        if scenario["status"] != "passed":
            print(f"seed {seed}: {scenario['status']}: {scenario.get('reason', '')}")
        for number, round_ in enumerate(rounds, 1):
            if number % 2 == 0:
                landed = "landed" if round_.get("interrupted_after_effect") else "not shown landed"
                counted[f"{round_['killed_at']} ({landed})"] += 1
    print(f"{args.harness}, {len(runs)} runs, {args.jobs} at once, {args.busy} busy loops, load {before} -> {after}")
    print("statuses: " + ", ".join(f"{status} {count}" for status, count in statuses.most_common()))
    # Each placement is a kill and a start, after the run's first start: the scenario's cost.
    starts = [1 + sum(len(round_["attempts"]) for round_ in rounds) for rounds in schedules]
    print(f"starts per run: {statistics.mean(starts):.2f} (most {max(starts)})")
    resolutions = [scenario["evidence"].get("resolution_ms") for _, scenario in runs]
    print(f"resolution_ms: {spread([ms for ms in resolutions if ms is not None])}, none in {resolutions.count(None)}")
    # What the kit allowed the kills that set the resolution (the run's pace, times three).
    allowed = [round_["late_after_ms"] for rounds in schedules for round_ in landed_rounds(rounds)]
    print(f"late_after_ms of the counted kills: {spread(allowed)}")
    print("effect -> answer rounds counted by:")
    for what, count in counted.most_common():
        print(f"  {count:3d}  {what}")
    return 0 if set(statuses) == {"failed" if args.harness == "records-late" else "passed"} else 1


if __name__ == "__main__":
    sys.exit(main())
