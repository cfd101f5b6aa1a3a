"""``retryproof run``: certify one runtime against the catalogue and write the reports."""

from __future__ import annotations

import gc
import os

from retryproof.conformance.file_names import file_stem
from retryproof.conformance.options import from_arguments
from retryproof.conformance.runner import handshake, select
from retryproof.conformance.runner import run as run_catalogue
from retryproof.conformance.writers.console import ConsoleWriter
from retryproof.conformance.writers.files import (
    ReplayFileWriter,
    ReportFileWriter,
    prepare_directory,
)
from retryproof.conformance.writers.step_summary import from_environment as step_summary


def main(args, name_files: bool = True) -> int:
    """``name_files``: print a ``wrote PATH`` line for each file written (``replay``
    runs into a scratch folder it removes: nothing there to point at)."""
    formats = args.format  # checked and deduplicated by options.report_formats
    options = from_arguments(args)
    select(options.only, options.skip)  # a selection that cannot run is known before the harness starts
    # A report that cannot be written (or that another run is writing) is known before the harness starts.
    claim = prepare_directory(args.out) if args.out else None
    try:
        summaries = step_summary()  # an unwritable GITHUB_STEP_SUMMARY is known before the harness starts
        hello, kept = handshake(options)  # its server, kept for the run's first sharing scenario
        # What is loaded by now (the kit's modules, the spec, its schema validators) lives
        # as long as the run: frozen, no collection walks it again (a full one, which
        # Hypothesis asks for, cost about 40 ms of the run's CPU). Thawed after it: a
        # process that runs the kit in its own (a test, the pytest plugin's caller) keeps
        # collecting what it had, its garbage cycles and their open files included. A
        # caller that froze its own heap keeps it frozen: thawing would thaw it too.
        thaw = not gc.get_freeze_count()
        if thaw:
            gc.freeze()
        try:
            out = args.out or os.path.join("reports", file_stem(hello.implementation.get("name"), "unnamed"))
            claim = claim or prepare_directory(out)
            writers = [ReportFileWriter(out, fmt) for fmt in formats]
            replays = ReplayFileWriter(out, formats)  # and removes the kit's files this run does not write
            finished = run_catalogue(options, hello, [ConsoleWriter(), *writers, replays, *summaries], kept)
        finally:
            if thaw:
                gc.unfreeze()
            if kept is not None:
                kept.end()  # a no-op once the run took it
    except BaseException:  # interrupted, or refused: a directory made for nothing goes again
        if claim is not None:
            claim.abandon()
        raise
    for path in [writer.path for writer in writers] + replays.paths:
        if name_files:
            print(f"wrote {path}")
    claim.release()
    return finished.verdict.exit_code
