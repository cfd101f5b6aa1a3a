"""User-facing errors: a typed diagnostic with a hint, never a traceback."""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: importing typing would be paid by every command, digest's too
if TYPE_CHECKING:
    from typing import IO, Any


class KitError(Exception):
    """Something the user can fix: bad arguments, an unreadable file, a harness that
    fails its handshake. The CLI prints ``error: <message>`` and ``hint: <hint>`` and
    exits 2 (the kit could not run)."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


def load_user_file(path: str, what: str, parse: Callable[[IO[str]], Any], kind: str, hint: str) -> Any:
    """Read and parse a file the user named (a baseline, a report, a replay).

    Every way it can go wrong (missing, unreadable, not UTF-8, not ``kind``) is a
    ``KitError`` naming the file; ``parse`` raises ``ValueError`` (JSON) or
    ``yaml.YAMLError`` for bad contents.
    """
    import yaml  # the one loader that reads YAML; imported here to keep errors light

    try:
        with open(path, encoding="utf-8") as handle:
            return parse(handle)
    except OSError as exc:
        raise KitError(f"cannot read {what} {path}: {exc.strerror or exc}", hint) from None
    except UnicodeDecodeError as exc:  # before ValueError, of which it is a kind
        raise KitError(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start})", hint) from None
    except (ValueError, yaml.YAMLError) as exc:
        detail = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise KitError(f"{what} {path} is not {kind}: {detail}", hint) from None
