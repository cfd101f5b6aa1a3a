"""Start-up next to the floor: a bare interpreter start, the reference harness up to its
``hello`` answer, and the kit's own ``retryproof list`` and ``digest``, each as a ratio
to the bare start measured in the same run.

    python benchmarks/bench_start.py [--rounds N]

The rounds of the commands are interleaved, so a machine shared with other work slows
them all alike; the ratio of medians is the figure to read, the milliseconds only
describe this machine at this moment.
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

from tabulate import tabulate

HELLO = json.dumps({"id": 1, "op": "hello", "args": {"protocol": "retryproof-harness/1"}}) + "\n"
TASK = json.dumps({"subject": "Fix login"})


def timed(command: list[str], stdin: str, env: dict[str, str]) -> float:
    """Seconds from spawn until the process has answered and exited (the harness
    exits at end of input, right after its ``hello`` answer)."""
    began = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=60)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{command} exited {done.returncode}: {done.stderr[-500:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    kit = [sys.executable, "-m", "retryproof.conformance.cli"]
    with tempfile.TemporaryDirectory() as state_dir:
        env = {**os.environ, "RETRYPROOF_STATE_DIR": state_dir}
        cases = {
            "bare interpreter (python -c pass)": ([sys.executable, "-c", "pass"], ""),
            "reference harness up to hello": ([sys.executable, "-m", "retryproof.reference_impl"], HELLO),
            "retryproof list": ([*kit, "list"], ""),
            "retryproof digest": ([*kit, "digest"], TASK),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (command, stdin) in cases.items():
                samples[name].append(timed(command, stdin, env))
    floor = statistics.median(samples["bare interpreter (python -c pass)"])
    rows = [
        (name, f"{statistics.median(values) * 1000:.0f}", f"{statistics.median(values) / floor:.2f}x")
        for name, values in samples.items()
    ]
    print(tabulate(rows, headers=("start", "median ms", "vs bare"), tablefmt="github"))
    print(f"\n{args.rounds} interleaved rounds; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
