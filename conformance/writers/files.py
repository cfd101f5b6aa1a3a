"""The report files (report.json, report.md, junit.xml, report.html, badge.json), written when the run ends,
and the replay file of each scenario whose evidence carries one."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable

from retryproof.conformance import replay_file
from retryproof.conformance.errors import KitError
from retryproof.conformance.events import Event, RunFinished, ScenarioFinished
from retryproof.conformance.writers.badge import render_badge
from retryproof.conformance.writers.document import report_document
from retryproof.conformance.writers.html import render_html
from retryproof.conformance.writers.junit import render_junit
from retryproof.conformance.writers.markdown import render_markdown

#: --format name -> (file name, renderer)
FORMATS: dict[str, tuple[str, Callable[[RunFinished], str]]] = {
    "json": ("report.json", lambda run: json.dumps(report_document(run), indent=2, ensure_ascii=False) + "\n"),
    "md": ("report.md", render_markdown),
    "junit": ("junit.xml", render_junit),
    "html": ("report.html", render_html),
    "badge": ("badge.json", render_badge),
}


class ReportFileWriter:
    """Writes one format into ``out`` when the run finishes (atomically: a reader
    never sees half a report)."""

    def __init__(self, out: str, fmt: str):
        self.out = out
        self.name, self.render = FORMATS[fmt]
        self.path = os.path.join(out, self.name)

    def handle(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            write_atomically(self.path, self.render(event))


class ReplayFileWriter:
    """Writes ``<out>/replays/<file>`` for every scenario whose evidence holds a
    minimal failing history (FUZZ-MODEL), for ``retryproof replay``."""

    def __init__(self, out: str):
        self.folder = os.path.join(out, "replays")
        self.paths: list[str] = []

    def handle(self, event: Event) -> None:
        if not isinstance(event, ScenarioFinished):
            return
        document = event.result.evidence.get("replay")
        if isinstance(document, dict):
            path = os.path.join(self.folder, replay_file.file_name(document))
            write_atomically(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
            self.paths.append(path)


def prepare_directory(path: str) -> None:
    """Create ``path`` and prove a file can be written in it, so that a run which could
    not keep its reports stops before it starts, not after minutes of work."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise KitError(
            f"cannot write reports to {path}: {exc.strerror or exc}",
            "choose an --out directory you can create and write to",
        ) from None


def write_atomically(path: str, text: str) -> None:
    """A reader never sees half a file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)
