"""User-facing errors: a typed diagnostic with a hint, never a traceback."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: importing typing would be paid by every command, digest's too
if TYPE_CHECKING:
    from typing import Any


class KitError(Exception):
    """Something the user can fix: bad arguments, an unreadable file, a harness that
    fails its handshake. The CLI prints ``error: <message>`` and ``hint: <hint>`` and
    exits 2 (the kit could not run)."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


#: The largest user file read (a report.json of a long nightly run is a few MiB); past
#: it, ``validate-report /dev/zero`` would read until memory runs out.
MAX_USER_FILE_BYTES = 256 * 1024 * 1024
#: Containers nested deeper than this are refused: no report, binding, baseline or replay
#: file nests a tenth as deep, and walking one (a schema check, an error message) recurses.
MAX_NESTING = 100


def load_user_file(
    path: str,
    what: str,
    parse: Callable[[str], Any],
    kind: str,
    hint: str,
    limit: int = MAX_USER_FILE_BYTES,
) -> Any:
    """Read and parse a file the user named (a baseline, a report, a replay, a binding).

    Every way it can go wrong is a ``KitError`` naming the file: missing, unreadable,
    larger than ``limit`` bytes, not UTF-8, not ``kind`` (``parse`` raises ``ValueError``
    for JSON, ``yaml.YAMLError`` for YAML), nested too deeply, or bigger once its YAML
    aliases are expanded than its text (an alias bomb: every reader of the value, a
    schema check's error message among them, would walk the expansion).
    """
    import yaml  # the one loader that reads YAML; imported here to keep errors light

    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise KitError(f"cannot read {what} {path}: {exc.strerror or exc}", hint) from None
    if len(data) > limit:
        raise KitError(f"{what} {path} is larger than {limit} bytes", hint)
    try:
        document = parse(data.decode("utf-8"))
    except UnicodeDecodeError as exc:  # before ValueError, of which it is a kind
        raise KitError(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start})", hint) from None
    except RecursionError:
        raise KitError(f"{what} {path} nests deeper than {MAX_NESTING} levels", hint) from None
    except (ValueError, yaml.YAMLError) as exc:
        detail = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise KitError(f"{what} {path} is not {kind}: {detail}", hint) from None
    problem = _shape_problem(document, len(data) + 1000)
    if problem:
        raise KitError(f"{what} {path} {problem}", hint)
    return document


def _shape_problem(document: Any, most_nodes: int) -> str | None:
    """Why ``document`` is refused (None: it is not): too deep, a value that contains
    itself (a recursive YAML alias), or more values than ``most_nodes`` once shared
    values (YAML aliases) count once per use. Each distinct container is sized once, so
    this costs the size of the text, not of the expansion."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(value: Any, depth: int) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        if depth > MAX_NESTING:
            raise _Refused(f"nests deeper than {MAX_NESTING} levels")
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in visiting:
            raise _Refused("holds a value that contains itself (a recursive alias)")
        visiting.add(key)
        children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > most_nodes:
                raise _Refused(f"holds more than {most_nodes} values once its aliases are expanded (an alias bomb?)")
        visiting.discard(key)
        sizes[key] = total
        return total

    try:
        size(document, 0)
    except _Refused as refused:
        return str(refused)
    return None


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 defines it: ``NaN``, ``Infinity`` and numbers too large for a
    double (``1e999``, which Python reads as infinity) are refused, so they are never
    carried into a report.json (``Infinity`` is not JSON) or a junit.xml ``time``."""
    return json.loads(text, parse_constant=_not_finite, parse_float=_finite_float)


def _not_finite(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is too large for a number")
    return number


class _Refused(Exception):
    """A user file's shape is refused (``_shape_problem``)."""
