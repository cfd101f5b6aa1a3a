"""``retryproof digest``: the write-task-v1 digest of task objects from a file or stdin."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from retryproof.conformance.errors import KitError
from retryproof.spec.digest import (
    ARRAY_FIELDS,
    SCALAR_FIELDS,
    ContractError,
    canonical_json,
    request_digest,
)
from retryproof.spec.jcs import DuplicateKeyError, loads_strict

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every digest start
if TYPE_CHECKING:
    from typing import IO

TASK_HINT = (
    f"a task is one JSON object (UTF-8, no duplicate keys) with only these fields: {', '.join(SCALAR_FIELDS)} "
    f"(each a string or null) and {', '.join(ARRAY_FIELDS)} (each an array of strings, or null)"
)


def _open_input(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise KitError(f"cannot read {path}: {exc.strerror}", "pass a readable file, or - for stdin") from None


def _parse(raw: bytes, where: str) -> object:
    try:
        return loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ContractError("invalid_request", where, f"is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except DuplicateKeyError as exc:
        # The input is the task, so the path from the root is the path in the task.
        raise ContractError("invalid_request", exc.field("task"), f"{exc} in {where}") from None
    except ValueError as exc:
        raise ContractError("invalid_request", where, f"is not a JSON value ({exc})") from None


def digest_one(raw: bytes, canonical: bool, where: str = "input") -> str:
    """The output line for one task's JSON text; raises ``ContractError``."""
    task = _parse(raw, where)
    return canonical_json(task).decode("utf-8") if canonical else request_digest(task)


def digest_lines(lines: Iterable[bytes], canonical: bool) -> Iterable[str]:
    """One output line per input line, so that the output lines up with the input line
    for line (``paste tasks.jsonl answers`` pairs them): the digest, ``error <code> line
    <N> <field>: <detail>``, or an empty line for a blank one (no task there, nothing wrong).

    A bad line never stops the stream: later lines still get their answers.
    """
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            yield ""
            continue
        try:
            yield digest_one(raw, canonical, where="task")
        except ContractError as exc:
            yield f"error {exc.code} line {number} {exc.field}: {exc.detail}"


def main(args) -> int:
    source = _open_input(args.file)
    with source:
        if args.jsonl:
            for line in digest_lines(source, args.canonical):
                print(line)
            return 0
        try:
            print(digest_one(source.read(), args.canonical))
        except ContractError as exc:
            raise KitError(f"{exc.code}: {exc.field}: {exc.detail}", TASK_HINT) from None
    return 0
