"""Render a page in real headless Chromium (the system package) and read the result:
the DOM after load (``--dump-dom``) and a screenshot decoded with the stdlib, so the
HTML report is judged the way a reader's browser shows it. No Python dependency."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import zlib
from collections import Counter

import pytest

#: Seconds one Chromium launch may take; every launch is ended with its process group.
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
)


def binary() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("chromium is not installed (.ci/run installs the system package)")
    return path


def _run(page: str, *flags: str) -> str:
    with tempfile.TemporaryDirectory(prefix="retryproof-chromium-") as profile:
        command = [binary(), *FLAGS, f"--user-data-dir={profile}", *flags, f"file://{os.path.abspath(page)}"]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            out, err = process.communicate(timeout=TIMEOUT_S)
        finally:
            try:  # Chromium's helper processes share its group; none may outlive the test
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        assert process.returncode == 0, err[-2000:]
        return out


def dump_dom(page: str) -> str:
    return _run(page, "--dump-dom")


def screenshot(page: str, path: str, width: int = 1000, height: int = 700) -> Counter:
    """The colours of the rendered viewport, pixel by pixel, as an (r, g, b) histogram."""
    _run(page, f"--screenshot={path}", f"--window-size={width},{height}")
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
    previous = bytearray(stride)
    histogram: Counter = Counter()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                corner = previous[i - channels] if i >= channels else 0
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        histogram.update(zip(line[0::channels], line[1::channels], line[2::channels], strict=True))
        previous = line
    return histogram
