"""The report files (report.json, report.md, junit.xml, report.html, badge.json, badge.svg), written when the run ends,
and the replay file of each scenario whose evidence carries one.

A report directory belongs to one run at a time (``prepare_directory`` takes an
exclusive lock on it for the run's life), so two runs into one ``--out`` can never
mix their files; each file is replaced atomically through a temporary name of its own.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import secrets
import tempfile
from collections.abc import Callable, Collection

from retryproof.conformance import replay_file
from retryproof.conformance.errors import KitError
from retryproof.conformance.events import Event, RunFinished, RunStarted, ScenarioFinished
from retryproof.conformance.writers.badge import render_badge
from retryproof.conformance.writers.document import report_document
from retryproof.conformance.writers.markdown import Sections, render_markdown


def _imported_when_written(module: str, renderer: str) -> Callable[[RunFinished], str]:
    """``renderer`` of ``writers.<module>``, imported when its format is first written:
    a run writes one or a few formats, and the HTML, SVG and JUnit modules (the
    timelines, the SVG drawing, xml.etree) cost every run's start about 20 ms of CPU
    before its harness starts."""

    def render(run: RunFinished) -> str:
        return getattr(importlib.import_module(f"retryproof.conformance.writers.{module}"), renderer)(run)

    return render


#: --format name -> (file name, renderer)
FORMATS: dict[str, tuple[str, Callable[[RunFinished], str]]] = {
    "json": ("report.json", lambda run: json.dumps(report_document(run), indent=2, ensure_ascii=False) + "\n"),
    "md": ("report.md", render_markdown),
    "junit": ("junit.xml", _imported_when_written("junit", "render_junit")),
    "html": ("report.html", _imported_when_written("html", "render_html")),
    "badge": ("badge.json", render_badge),
    "svg": ("badge.svg", _imported_when_written("svg", "render_checklist_badge")),
}


class ReportFileWriter:
    """Writes one format into ``out`` when the run finishes (atomically: a reader
    never sees half a report). report.md's evidence sections are drawn as their
    scenarios finish (``markdown.Sections``), the rest when the run does."""

    def __init__(self, out: str, fmt: str):
        self.out = out
        self.name, self.render = FORMATS[fmt]
        self.path = os.path.join(out, self.name)
        self._sections = Sections() if fmt == "md" else None
        self._black_box = False

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._black_box = event.info.black_box
        elif isinstance(event, ScenarioFinished) and self._sections is not None:
            self._sections.add(event.result, self._black_box)
        elif isinstance(event, RunFinished):
            text = self.render(event) if self._sections is None else render_markdown(event, self._sections)
            write_atomically(self.path, text)


class ReplayFileWriter:
    """Writes ``<out>/replays/<file>`` for every scenario whose evidence holds a
    replay (FUZZ-MODEL's failing history, CRASH-POINTS', KILL-NEMESIS'), for
    ``retryproof replay``; then, once the run's reports are written (this sink comes
    after the ``ReportFileWriter``s: a run stopped before that keeps the earlier
    reports), removes the kit's files in ``out`` this run did not write, the report
    files of the formats not in ``formats`` and replay files of earlier runs, so that
    no earlier verdict or badge stands beside this one. Other files stay."""

    def __init__(self, out: str, formats: Collection[str] = tuple(FORMATS)):
        self.out = out
        self.folder = os.path.join(out, "replays")
        self.formats = formats
        self.paths: list[str] = []
        self._bundled_reference = False

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            # No --harness, --python or --binding: the run's target was the bundled reference.
            self._bundled_reference = event.info.target == ""
        elif isinstance(event, RunFinished):
            self._remove_unwritten()
        if not isinstance(event, ScenarioFinished):
            return
        document = event.result.evidence.get("replay")
        if isinstance(document, dict):
            document = {**document, replay_file.BUNDLED_REFERENCE: self._bundled_reference}
            path = os.path.join(self.folder, replay_file.file_name(document))
            write_atomically(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
            self.paths.append(path)

    def _remove_unwritten(self) -> None:
        unwritten = [os.path.join(self.out, name) for fmt, (name, _) in FORMATS.items() if fmt not in self.formats]
        try:
            names = os.listdir(self.folder)
        except OSError:  # no replays folder: no earlier replays
            names = []
        replays = [os.path.join(self.folder, name) for name in names if replay_file.is_file_name(name)]
        unwritten += [path for path in replays if path not in self.paths]
        for path in unwritten:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise _cannot("remove", path, exc) from None
        if replays:
            try:
                os.rmdir(self.folder)  # the kit's folder, emptied: gone too, unless something else is there
            except OSError:
                pass


class DirectoryClaim:
    """A run's hold on its report directory: an exclusive ``flock`` on the directory
    itself (no lock file to leave behind), released by ``release``, at the end of a
    ``with`` block, or when the process ends, however it ends. Dropping the object
    releases the lock too, so a caller keeps it for as long as it writes."""

    def __init__(self, path: str, fd: int, created: bool = False):
        self.path = path
        self._fd: int | None = fd
        self.created = created  # this claim made the directory

    def abandon(self) -> None:
        """Release the directory and, if this claim made it and nothing was written
        there, remove it: an interrupted or refused run leaves no empty ``--out``."""
        self.release()
        if self.created:
            try:
                os.rmdir(self.path)
            except OSError:
                pass  # something was written there after all: keep it

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirectoryClaim:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()


def prepare_directory(path: str) -> DirectoryClaim:
    """Create ``path``, prove a file can be written in it and claim it for this run,
    so that a run which could not keep its reports, or would mix them with another
    run's, stops before it starts, not after minutes of work. Keep the claim for as
    long as the run writes there."""
    if os.path.islink(path) and not os.path.exists(path):
        raise KitError(
            f"cannot write reports to {path}: it is a symbolic link to {os.readlink(path)}, which does not exist",
            "create the directory it points to, or choose another --out directory",
        )
    created = not os.path.isdir(path)
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise KitError(
            f"cannot write reports to {path}: {exc.strerror or exc}",
            "choose an --out directory you can create and write to",
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise KitError(
            f"another retryproof run is writing its reports to {path}",
            "let it finish, or give this run an --out directory of its own",
        ) from None
    return DirectoryClaim(path, fd, created)


def write_atomically(path: str, text: str) -> None:
    """A reader never sees half a file, and two writers never share a temporary name.
    A file that cannot be written (a full disk) is a ``KitError`` naming it; the
    earlier file of that name stays as it was, and no temporary file is left."""
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    try:
        os.makedirs(folder or ".", exist_ok=True)
        with open(temporary, "x", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _cannot("write", path, exc) from None
        raise


def _cannot(what: str, path: str, exc: OSError) -> KitError:
    """A report file the machine would not let the kit write or remove (a full disk,
    a read-only or vanished folder): the machine's problem, not the runtime's nor the
    kit's, named with the file. What the run found was printed before its files."""
    return KitError(
        f"cannot {what} {path}: {exc.strerror or exc}",
        "make room on that file system or fix its permissions (or choose another --out directory), "
        "then run again with the same seed",
    )
