"""Refusing missing and unknown op arguments, for every service the harness serves.

A misspelt argument silently ignored would turn a kit bug into a passing scenario, so
each op names the arguments it takes and anything else is ``invalid_request``. The values
are each service's own to check, where it uses them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retryproof.spec.digest import ContractError

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["take"]


def take(args: Mapping[str, Any], required: Sequence[str], optional: Sequence[str] = ()) -> Mapping[str, Any]:
    """``args``, once every name in it is ``required`` or ``optional`` and every
    ``required`` one is there; ``ContractError`` (``invalid_request``) otherwise."""
    for name in args:
        if name not in required and name not in optional:
            raise ContractError("invalid_request", f"args.{name}", "is not an argument of this op")
    for name in required:
        if name not in args:
            raise ContractError("invalid_request", f"args.{name}", "is required")
    return args
