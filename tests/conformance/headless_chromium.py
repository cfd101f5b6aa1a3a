"""Render a page in real headless Chromium (the system package) and read the result:
the DOM after load and a screenshot decoded with the stdlib, so the HTML report is
judged the way a reader's browser shows it. No Python dependency.

One Chromium per test process, driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: NUL-ended JSON on its descriptors 3 and 4), every page
in its one tab: a launch costs about 0.7 CPU-s (``FLAGS``), rendering a report a
tenth of that, and the suite rendered 13 pages, each in a Chromium of its own. What a page
gets is what ``--dump-dom`` and ``--screenshot --window-size`` gave: the document's
``outerHTML`` once it has loaded, and the viewport of that size."""

from __future__ import annotations

import atexit
import base64
import fcntl
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import zlib
from collections import Counter
from itertools import accumulate
from typing import Any

import pytest

#: A running sum's value modulo 256 (a bound method: mapped over a row, no Python frame).
_LOW_BYTE = (0xFF).__and__
#: Seconds Chromium may take to start, or to answer one command or load one page.
TIMEOUT_S = 90

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    # Chromium 156 preloads its omnibox popup's WebUI in a renderer of its own, and its
    # first tab is the new-tab page (``about:blank`` below): with both, a launch cost
    # 1.5-2.0 CPU-s by 12 s after it, without them 0.7-0.9.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup",
)


def binary() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("chromium is not installed (.ci/run installs the system package)")
    return path


class _Browser:
    """A headless Chromium in a process group of its own and the pipe that drives it.
    Closing it (at this process's exit, or after a command it did not answer in time)
    kills the group; Chromium also ends by itself once its pipe closes."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="retryproof-chromium-")
        commands, self._commands = os.pipe()  # Chromium reads its descriptor 3
        self._answers, answers = os.pipe()  # and writes its descriptor 4
        # The shell moves them to 3 and 4 (a preexec_fn is unsafe beside the threads a
        # test process may have), from 10 and above, where neither can be 3 or 4.
        commands, answers = (_above_ten(commands), _above_ten(answers))
        move = f'exec "$@" 3<&{commands} 4>&{answers} {commands}<&- {answers}>&-'
        command = [binary(), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"]
        self.process = subprocess.Popen(
            ["bash", "-c", move, "bash", *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(commands, answers),
            start_new_session=True,
            # Chromium makes its singleton socket's folder in TMPDIR and, killed, leaves it
            # there: inside the profile, it is removed with the profile.
            env={**os.environ, "TMPDIR": self.profile},
        )
        os.close(commands)
        os.close(answers)
        self._sent = 0
        self._closed = False
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        self._session: str | None = None  # the tab's (``render``)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """One command's result (its events meanwhile are kept for ``event``)."""
        self._sent += 1
        message = {"id": self._sent, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            answer = self._next(deadline, method)
            if answer.get("id") == self._sent:
                assert "error" not in answer, (method, answer["error"])
                return answer["result"]
            self._events.append(answer)

    def event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for found in self._events:
                if found.get("method") == method and found.get("sessionId") == session:
                    self._events.remove(found)
                    return found
            self._events.append(self._next(deadline, method))

    def _next(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._answers], [], [], max(0.0, left))
            chunk = os.read(self._answers, 1 << 20) if ready else b""
            if not chunk:
                self.close()
                raise AssertionError(f"Chromium {'ended' if ready else 'did not answer'} ({waiting_for})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(line)

    def render(self, page: str, width: int | None = None, height: int | None = None) -> str:
        """``page`` loaded in the browser's one tab, its viewport ``width`` x ``height``
        when given (else the default one, as a new tab has): the session that drives the
        tab. One tab for every page: a new tab's renderer process cost each page about
        0.1 CPU-s more (file:// pages share a site, so navigating keeps its renderer), and
        each navigation is a new document, its script and layout afresh."""
        if self._session is None:
            tab = self.send("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.send("Target.attachToTarget", targetId=tab, flatten=True)["sessionId"]
            self.send("Page.enable", self._session)
        session = self._session
        if width and height:
            self.send(
                "Emulation.setDeviceMetricsOverride",
                session,
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
        else:
            self.send("Emulation.clearDeviceMetricsOverride", session)
        # the tab's earlier pages' events, so that only this page's load event is waited for
        self._events = [event for event in self._events if event.get("sessionId") != session]
        navigated = self.send("Page.navigate", session, url=f"file://{os.path.abspath(page)}")
        # a navigation within the document (a URL differing only by its fragment) loads
        # nothing, and its load event would never come
        assert "loaderId" in navigated and "errorText" not in navigated, (page, navigated)
        self.event("Page.loadEventFired", session)
        return session

    def close(self) -> None:
        """Once: a second close would close descriptor numbers and signal a process
        group that may belong to someone else by then."""
        global _BROWSER
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        _BROWSER = None if _BROWSER is self else _BROWSER
        for descriptor in (self._commands, self._answers):
            try:
                os.close(descriptor)
            except OSError:
                pass
        try:  # Chromium's helper processes share its group; none may outlive the session
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def _above_ten(descriptor: int) -> int:
    """``descriptor`` moved to the lowest free number from 10 on."""
    moved = fcntl.fcntl(descriptor, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(descriptor)
    return moved


_BROWSER: _Browser | None = None


def _browser() -> _Browser:
    global _BROWSER
    if _BROWSER is None:
        binary()  # skips the test when there is none
        _BROWSER = _Browser()
        atexit.register(_BROWSER.close)
    return _BROWSER


def close() -> None:
    """End this process's browser, if it has one (the next page launches another):
    tests/conftest.py, once no test of the worker's next ones renders a page."""
    if _BROWSER is not None:
        _BROWSER.close()


def _in_tab(page: str, read: Any, width: int | None = None, height: int | None = None) -> Any:
    browser = _browser()
    return read(browser, browser.render(page, width, height))


def dump_dom(page: str) -> str:
    expression = "document.documentElement.outerHTML"
    return _in_tab(
        page,
        lambda browser, session: browser.send("Runtime.evaluate", session, expression=expression, returnByValue=True)[
            "result"
        ]["value"],
    )


def screenshot(page: str, path: str, width: int = 1000, height: int = 700) -> Counter:
    """The colours of the rendered viewport, pixel by pixel, as an (r, g, b) histogram."""
    png = _in_tab(
        page,
        lambda browser, session: browser.send("Page.captureScreenshot", session, format="png")["data"],
        width,
        height,
    )
    with open(path, "wb") as handle:
        handle.write(base64.b64decode(png))
    return colours(path)


def colours(path: str) -> Counter:
    """An 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes), decoded."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks, header = 8, [], b""
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, colour_type, interlace = header[8], header[9], header[12]
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    raw = zlib.decompress(b"".join(chunks))
    previous = bytes(stride)
    histogram: Counter = Counter()
    for row in range(height):
        start = row * (stride + 1)
        line = _unfiltered(raw[start], raw[start + 1 : start + 1 + stride], previous, channels)
        histogram.update(zip(line[0::channels], line[1::channels], line[2::channels], strict=True))
        previous = line
    return histogram


def _unfiltered(kind: int, line: bytes, previous: bytes, channels: int) -> bytes:
    """One row with its PNG filter undone (RFC 2083, 6.2-6.6). A screenshot has
    millions of bytes: the filters that allow it are undone a whole row at a time
    (Up as one byte-wise addition, Sub as a running sum per channel), and only Average
    and Paeth, which need each byte's left neighbour already undone, byte by byte."""
    if kind == 0:
        return line
    if kind == 2:
        return _bytewise_sum(line, previous)
    if kind == 1:
        undone = bytearray(len(line))
        for channel in range(channels):
            undone[channel::channels] = bytes(map(_LOW_BYTE, accumulate(line[channel::channels])))
        return bytes(undone)
    undone = bytearray(line)
    for i in range(channels):  # no left neighbour: Average adds half of up, Paeth all of it
        undone[i] = (undone[i] + (previous[i] >> 1 if kind == 3 else previous[i])) & 0xFF
    if kind == 3:
        for i in range(channels, len(undone)):
            undone[i] = (undone[i] + ((undone[i - channels] + previous[i]) >> 1)) & 0xFF
        return bytes(undone)
    assert kind == 4, f"unknown PNG filter {kind}"
    # Paeth predicts each byte by its left neighbour wherever the two bytes above it are
    # equal (most of a page): there it is Sub, a running sum; elsewhere byte by byte.
    size = len(undone) - channels
    changes = (int.from_bytes(previous[channels:], "big") ^ int.from_bytes(previous[:-channels], "big")).to_bytes(
        size, "big"
    )
    done = channels
    for found in re.finditer(rb"[^\x00]", changes):
        i = found.start() + channels
        if i - done > 2 * channels:
            _running_sum(undone, line, done, i, channels)
        else:
            for j in range(done, i):
                undone[j] = (line[j] + undone[j - channels]) & 0xFF
        left, up, corner = undone[i - channels], previous[i], previous[i - channels]
        to_left, to_up = up - corner, left - corner  # the predictor's distance from left, from up
        to_corner = abs(to_left + to_up)
        to_left, to_up = abs(to_left), abs(to_up)
        guess = left if to_left <= to_up and to_left <= to_corner else up if to_up <= to_corner else corner
        undone[i] = (undone[i] + guess) & 0xFF
        done = i + 1
    _running_sum(undone, line, done, len(undone), channels)
    return bytes(undone)


def _running_sum(undone: bytearray, line: bytes, start: int, end: int, channels: int) -> None:
    """Bytes ``start`` to ``end`` of ``undone``, each its filtered value plus its left
    neighbour's undone one (Sub), the byte before ``start`` of each channel undone."""
    for first in range(start, min(start + channels, end)):
        sums = accumulate(line[first:end:channels], initial=undone[first - channels])
        undone[first:end:channels] = bytes(map(_LOW_BYTE, sums))[1:]


def _bytewise_sum(a: bytes, b: bytes) -> bytes:
    """Each byte of ``a`` plus the one of ``b`` under it, modulo 256: one addition of two
    integers, the top bit of each byte added apart so no carry crosses into the next."""
    size = len(a)
    high = int.from_bytes(b"\x80" * size, "big")
    x, y = int.from_bytes(a, "big"), int.from_bytes(b, "big")
    return (((x & ~high) + (y & ~high)) ^ ((x ^ y) & high)).to_bytes(size, "big")
