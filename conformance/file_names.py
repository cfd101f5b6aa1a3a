"""File names made from what a harness calls itself (the report directory, a replay
file): a leaf, so the writers, the replay format and the commands share it without
any of them importing another for it."""

from __future__ import annotations

import re


def file_stem(value: object, fallback: str, limit: int = 64) -> str:
    """A file-name part made from harness text: ASCII letters, digits and ``._-`` only
    (so its length in bytes is its length in characters), at most ``limit`` of them,
    never empty, never starting with a dot. File systems cap a name at 255 bytes."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", str(value)).strip("-.")[:limit].strip("-.")
    return stem or fallback
