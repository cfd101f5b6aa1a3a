"""The GitHub Actions job summary: when ``GITHUB_STEP_SUMMARY`` names a file, a concise
markdown summary of the run is appended to it (GitHub shows it on the run's page).
Verdict, counts, each failure with its requirements and how to reproduce it; the full
evidence stays in the report files. The same pieces as report.md, not a copy of them."""

from __future__ import annotations

import os

from retryproof.conformance.errors import KitError
from retryproof.conformance.events import Event, RunFinished
from retryproof.conformance.writers import content
from retryproof.conformance.writers.escape import md_block, md_inline
from retryproof.conformance.writers.markdown import failure_lines, verdict_lines

#: The environment variable GitHub Actions sets to the step's summary file.
VARIABLE = "GITHUB_STEP_SUMMARY"


def render_step_summary(run: RunFinished) -> str:
    implementation = run.info.implementation
    out = [
        f"## retryproof: {md_inline(implementation.get('name', '?'))} {md_inline(implementation.get('version', ''))}",
        "",
        *verdict_lines(run),
        *failure_lines(run, reason_limit=300, heading="###"),
    ]
    failures = content.failures(run)
    if failures:
        out += ["<details><summary>Reproduce the failures</summary>", ""]
        out += [md_block("\n".join(result.reproduce for result in failures)), "", "</details>", ""]
    info = run.info
    out += [
        f"retryproof {md_inline(info.kit_version)}, spec {md_inline(info.spec_version)}, seed {info.seed}, "
        f"{len(run.results)} scenario(s) in {run.duration_s:.1f}s.",
        "",
    ]
    return "\n".join(out) + "\n"


class StepSummaryWriter:
    """Appends the summary when the run finishes (other steps may have written theirs)."""

    def __init__(self, path: str):
        self.path = path
        try:  # known before the run starts, not after it
            with open(path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise KitError(
                f"cannot append to {VARIABLE} file {path}: {exc.strerror or exc}",
                f"unset {VARIABLE} outside GitHub Actions, or point it at a writable file",
            ) from None

    def handle(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(render_step_summary(event))


def append_failure(command: str, message: str, hint: str | None, exit_code: int) -> None:
    """When ``GITHUB_STEP_SUMMARY`` names a file: say that ``retryproof COMMAND`` could
    not reach a verdict and why, so the job summary is not blank exactly when the job
    could not run. Best effort: an unwritable summary file is what may have stopped it."""
    path = os.environ.get(VARIABLE)
    if not path:
        return
    lines = [
        f"## retryproof {md_inline(command)}: no verdict (exit {exit_code})",
        "",
        f"**error:** {md_inline(message)}",
        "",
        *([f"**hint:** {md_inline(hint)}", ""] if hint else []),
    ]
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError:
        pass


def from_environment() -> list[StepSummaryWriter]:
    path = os.environ.get(VARIABLE)
    return [StepSummaryWriter(path)] if path else []
