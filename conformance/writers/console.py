"""One progress line per scenario as it finishes, then the verdict."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from retryproof.conformance.events import (
    Event,
    RunFinished,
    RunStarted,
    ScenarioFinished,
)
from retryproof.conformance.writers.content import tally, tool_paths_line
from retryproof.conformance.writers.escape import one_line


class ConsoleWriter:
    """Progress for a human. The console is only a view: when its reader goes away
    (``retryproof run | head``) it falls silent, and the run goes on to its verdict
    and its report files."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self.closed = False

    def _print(self, text: str) -> None:
        if self.closed:
            return
        try:
            print(text, file=self.stream, flush=True)
        except BrokenPipeError:
            self.closed = True
            _discard_output(self.stream)

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            implementation = event.info.implementation
            self._print(
                f"retryproof {event.info.kit_version}: {event.total} scenario(s) against "
                f"{one_line(implementation.get('name'))} {one_line(implementation.get('version'))}, seed {event.info.seed}"
            )
        elif isinstance(event, ScenarioFinished):
            result = event.result
            width = len(str(event.total))
            mark = f" [{result.baseline}]" if result.baseline else ""
            line = f"[{event.index:>{width}}/{event.total}] {result.status.upper():<14} {result.entry.id:<30} {result.duration_s:6.2f}s{mark}"
            if result.reason and result.status != "passed":
                # A failure's reason is what the user acts on (it may end in a replay
                # command), so it is kept whole; other statuses only say why briefly.
                line += f"  {one_line(result.reason, None if result.status in ('failed', 'error') else 160)}"
            self._print(line)
            if result.status in ("failed", "error"):
                self._print(f"    reproduce: {one_line(result.reproduce)}")
        elif isinstance(event, RunFinished):
            verdict = event.verdict
            self._print(f"{verdict.headline}: {tally(event.results).line()} in {event.duration_s:.1f}s")
            self._print(f"  {tool_paths_line(event)}")
            for scenario_id, why in verdict.blocking:
                # A baselined failure leaves the exit code 0: "blocking" would tell a CI reader the opposite.
                what = "expected (baseline)" if scenario_id in verdict.expected_failures else "blocking"
                self._print(f"  {what} {scenario_id}: {one_line(why, 200)}")
            for scenario_id, why in verdict.warnings:
                self._print(f"  warning {scenario_id} (SHOULD): {one_line(why, 200)}")
            for scenario_id in verdict.stale_baseline:
                self._print(f"  stale baseline entry {scenario_id}: it passes now; remove it from the baseline")


def _discard_output(stream: TextIO) -> None:
    """Point the stream's file descriptor at /dev/null, so the text still buffered in
    it, and anything printed later, goes nowhere instead of raising again."""
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return  # not backed by a file descriptor: nothing will be flushed to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)
