"""The report files: report.json, report.md and junit.xml, written when the run ends."""

from __future__ import annotations

import json
import os
from typing import Callable

from conformance.events import Event, RunFinished
from conformance.writers.document import report_document
from conformance.writers.junit import render_junit
from conformance.writers.markdown import render_markdown

#: --format name -> (file name, renderer)
FORMATS: dict[str, tuple[str, Callable[[RunFinished], str]]] = {
    "json": ("report.json", lambda run: json.dumps(report_document(run), indent=2, ensure_ascii=False) + "\n"),
    "md": ("report.md", render_markdown),
    "junit": ("junit.xml", render_junit),
}


class ReportFileWriter:
    """Writes one format into ``out`` when the run finishes (atomically: a reader
    never sees half a report)."""

    def __init__(self, out: str, fmt: str):
        self.out = out
        self.name, self.render = FORMATS[fmt]
        self.path = os.path.join(out, self.name)

    def handle(self, event: Event) -> None:
        if not isinstance(event, RunFinished):
            return
        os.makedirs(self.out, exist_ok=True)
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(self.render(event))
        os.replace(temporary, self.path)
