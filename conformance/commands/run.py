"""``retryproof run``: certify one runtime against the catalogue and write the reports."""

from __future__ import annotations

import os

from retryproof.conformance.errors import KitError
from retryproof.conformance.options import from_arguments
from retryproof.conformance.runner import probe
from retryproof.conformance.runner import run as run_catalogue
from retryproof.conformance.writers.console import ConsoleWriter
from retryproof.conformance.writers.escape import file_stem
from retryproof.conformance.writers.files import (
    FORMATS,
    ReplayFileWriter,
    ReportFileWriter,
    prepare_directory,
)
from retryproof.conformance.writers.step_summary import from_environment as step_summary


def main(args) -> int:
    formats = list(dict.fromkeys(args.format))
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:
        raise KitError(f"unknown report format(s): {', '.join(unknown)}", f"choose from {','.join(FORMATS)}")
    options = from_arguments(args)
    if args.out:
        prepare_directory(args.out)  # a report that cannot be written is known before the harness starts
    summaries = step_summary()  # an unwritable GITHUB_STEP_SUMMARY is known before the harness starts
    hello = probe(options)
    out = args.out or os.path.join("reports", file_stem(hello.get("implementation", {}).get("name"), "unnamed"))
    if not args.out:
        prepare_directory(out)
    writers = [ReportFileWriter(out, fmt) for fmt in formats]
    replays = ReplayFileWriter(out)
    finished = run_catalogue(options, hello, [ConsoleWriter(), *writers, replays, *summaries])
    for path in [writer.path for writer in writers] + replays.paths:
        print(f"wrote {path}")
    return finished.verdict.exit_code
