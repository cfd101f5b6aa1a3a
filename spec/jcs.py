"""RFC 8785 JSON Canonicalization Scheme, and the strict JSON reading it needs.

Every side of the contract (the kit, the reference runtime, a vendor's harness) must
produce the same bytes for the same value, so the serializer lives here, beside the
digest, and depends on nothing but the standard library.
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CanonicalizationError", "DuplicateKeyError", "canonical_bytes", "loads_strict"]

# I-JSON (RFC 7493 2.2): beyond this an integer has no exact IEEE 754 double, so two
# different integers could serialize, and hash, the same.
MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalizationError(ValueError):
    """A value that has no RFC 8785 form (NaN, infinity, a lone surrogate, a set, ...)."""


def canonical_bytes(value: Any) -> bytes:
    """Serialize ``value`` as RFC 8785 canonical JSON, UTF-8 encoded."""
    parts: list[str] = []
    _write(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate cannot be UTF-8
        raise CanonicalizationError("string is not valid Unicode (lone surrogate)") from exc


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalizationError(f"integer {value} is outside the I-JSON range; send it as a string")
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        # RFC 8785 3.2.3: property names sort by their UTF-16 code units.
        for index, key in enumerate(sorted(value, key=_utf16_key)):
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r} is not a string")
            if index:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    else:
        raise CanonicalizationError(f"{type(value).__name__} is not a JSON value")


def _utf16_key(key: Any) -> bytes:
    if not isinstance(key, str):
        raise CanonicalizationError(f"object key {key!r} is not a string")
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    # Python's escaping with ensure_ascii=False is exactly ECMAScript's JSON.stringify:
    # the two-character escapes for \b \t \n \f \r, \u00xx (lowercase) for the other
    # C0 controls, and every other character (U+2028, U+007F, non-BMP) literal.
    return json.dumps(text, ensure_ascii=False)


def _number(value: float) -> str:
    """ECMAScript Number::toString, which RFC 8785 3.2.2.3 adopts."""
    if not math.isfinite(value):
        raise CanonicalizationError(f"{value!r} has no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    from decimal import Decimal  # here: most tasks hold no number, and a harness starts faster without it

    # repr() gives the shortest digits that round-trip, as ECMAScript requires.
    _, digits_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    if not isinstance(exponent, int):  # 'n', 'N', 'F': unreachable for a finite value
        raise CanonicalizationError(f"{value!r} has no JSON form")
    digits = "".join(map(str, digits_tuple)).rstrip("0") or "0"
    # value = 0.DIGITS * 10**point
    point = exponent + len("".join(map(str, digits_tuple)))
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        e = point - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        text = f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + text


class DuplicateKeyError(ValueError):
    """An object in the JSON text names one key twice. ``path`` locates that object's
    key from the root: ``("subject",)``, ``("args", "task", "subject")``, ``("refs", 0, "k")``."""

    def __init__(self, path: tuple[str | int, ...]):
        super().__init__(f"duplicate key {path[-1]!r}")
        self.path = path

    def field(self, root: str) -> str:
        """The path in the notation of ``ContractError.field``: ``task.references[0]``."""
        return root + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in self.path)


class _Duplicated(dict):
    """An object that repeated ``key``; a marker until the parse is done and the path known."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str):
        super().__init__(pairs)
        self.key = key


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _find_duplicate(value: Any, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    if isinstance(value, _Duplicated):
        return path + (value.key,)
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _find_duplicate(child, path + (key,))
        if found:
            return found
    return None


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON refusing what would otherwise be silently lost or invented.

    A duplicate key would drop one of its values (``DuplicateKeyError``, naming where),
    and NaN/Infinity are not JSON (``ValueError``; ``json.JSONDecodeError`` is one too).
    """
    duplicated = False

    def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicated
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                duplicated = True
                return _Duplicated(pairs, key)
            seen.add(key)
        return dict(pairs)

    value = json.loads(text, object_pairs_hook=unique_pairs, parse_constant=_reject_constant)
    if duplicated:  # walk only then, so a clean parse costs nothing extra
        raise DuplicateKeyError(_find_duplicate(value, ()) or ())
    return value
