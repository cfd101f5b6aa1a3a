"""Render a page in real headless Chromium (the system package) and read the result:
the DOM after load (``--dump-dom``) and a screenshot decoded with the stdlib, so the
HTML report is judged the way a reader's browser shows it. No Python dependency."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import zlib
from collections import Counter
from itertools import accumulate

import pytest

#: A running sum's value modulo 256 (a bound method: mapped over a row, no Python frame).
_LOW_BYTE = (0xFF).__and__
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
