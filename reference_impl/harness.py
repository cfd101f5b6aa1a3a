"""The reference runtime's op table for ``retryproof-harness/1``.

Ops come in groups; each group brings its handlers plus the capabilities and failpoints
it adds to ``hello``. ``op_groups`` lists the groups this harness serves and
``build_handlers`` turns them into the one handler dict that ``retryproof.spec.protocol.serve``
runs, ``hello`` included, so what ``hello`` declares is always exactly what is served.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from retryproof.reference_impl import __version__, approval_names
from retryproof.reference_impl.arguments import take
from retryproof.reference_impl.runtime import WRITE_TASK_FAILPOINTS, Runtime
from retryproof.spec.digest import ContractError, check_submission_id
from retryproof.spec.protocol import hello_handler

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

    from retryproof.spec.protocol import Handler

__all__ = ["OpGroup", "approval_ops", "build_handlers", "op_groups", "write_task_ops"]

# The flat args of each tamper action, besides ``action`` itself.
_TAMPER_ARGS = {
    "remove_task": ("task_id",),
    "occupy_task_path": ("client_submission_id",),
    "set_receipt_schema": ("client_submission_id", "digest_schema_version"),
}


class OpGroup:
    """Ops served together, with what they add to ``hello``. (A plain class, like the
    messages of ``spec.protocol``, which say why not a named tuple or a dataclass.)"""

    __slots__ = ("handlers", "capabilities", "failpoints", "tamper_actions")

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        capabilities: tuple[str, ...] = (),
        failpoints: tuple[str, ...] = (),
        tamper_actions: tuple[str, ...] = (),
    ) -> None:
        self.handlers = handlers
        self.capabilities = capabilities
        self.failpoints = failpoints
        self.tamper_actions = tamper_actions


def _keywords(method: Callable[..., Mapping[str, Any]], *names: str) -> Handler:
    """A handler passing exactly the args ``names`` to ``method`` as keywords."""
    return lambda args: method(**take(args, names))


def write_task_ops(runtime: Runtime) -> OpGroup:
    """write_task and its companions, served by one ``Runtime``."""

    def write_task(args: Mapping[str, Any]) -> Mapping[str, Any]:
        take(args, ("task",), ("client_submission_id", "invocation"))
        if "client_submission_id" in args:
            # Present means the id path: null is an invalid id, not the legacy path.
            check_submission_id(args["client_submission_id"])
        return runtime.write_task(args["task"], args.get("client_submission_id"), args.get("invocation"))

    def tamper(args: Mapping[str, Any]) -> Mapping[str, Any]:
        action = take(args, ("action",), ("task_id", "client_submission_id", "digest_schema_version"))["action"]
        if action not in _TAMPER_ARGS:
            raise ContractError("invalid_request", "args.action", f"must be one of {', '.join(_TAMPER_ARGS)}")
        take(args, ("action", *_TAMPER_ARGS[action]))
        return runtime.tamper(args)

    handlers: dict[str, Handler] = {
        "write_task": write_task,
        "list_tasks": _keywords(runtime.list_tasks),
        "read_task": _keywords(runtime.read_task, "task_id"),
        "diagnose": _keywords(runtime.diagnose, "client_submission_id", "stale_after_s"),
        "tamper": tamper,
        "write_report": _keywords(runtime.write_report, "client_submission_id", "task_id", "content"),
        "list_reports": _keywords(runtime.list_reports),
    }
    return OpGroup(
        handlers,
        capabilities=("write_task", "legacy", "diagnose", "tamper", "write_report", "multiprocess"),
        failpoints=WRITE_TASK_FAILPOINTS,
        tamper_actions=tuple(_TAMPER_ARGS),
    )


def approval_ops(runtime: Runtime) -> OpGroup:
    """The approval ops, served by ``approval.op_group(runtime)``, which is imported and
    built on the first approval call (threads racing for it build it once). Importing
    the approval service (pathlib, its store and executors) at start was paid by every
    harness start, and most scenarios never call an approval op; ``hello`` declares the
    same capability and failpoints either way (``approval_names``)."""
    lock = threading.Lock()
    served: dict[str, Handler] = {}

    def load() -> Mapping[str, Handler]:
        with lock:
            if not served:
                from retryproof.reference_impl import approval

                handlers = approval.op_group(runtime)["handlers"]
                if set(handlers) != set(approval_names.OPS):
                    raise RuntimeError(f"the approval service serves {sorted(handlers)}, not approval_names.OPS")
                served.update(handlers)
        return served

    def deferred(op: str) -> Handler:
        return lambda args: load()[op](args)

    return OpGroup(
        {op: deferred(op) for op in approval_names.OPS},
        capabilities=(approval_names.CAPABILITY,),
        failpoints=approval_names.FAILPOINTS,
    )


def op_groups(runtime: Runtime) -> list[OpGroup]:
    """Every op group this harness serves.

    Another service of the reference runtime joins by appending its own ``OpGroup``
    here (the approval ops: capability ``approval``, failpoints ``approval.*``); its
    ops then appear in the handler table and in ``hello`` with no other change.
    """
    return [write_task_ops(runtime), approval_ops(runtime)]


def build_handlers(groups: Sequence[OpGroup], implementation: str = "reference") -> dict[str, Handler]:
    """The handler table for ``retryproof.spec.protocol.serve``: ``hello`` and every group's ops."""
    handlers: dict[str, Handler] = {}
    for group in groups:
        clash = handlers.keys() & group.handlers.keys()
        if clash:
            raise ValueError(f"ops served twice: {sorted(clash)}")
        handlers.update(group.handlers)
    handlers["hello"] = hello_handler(
        {"name": implementation, "version": __version__, "language": "python"},
        [name for group in groups for name in group.capabilities],
        [name for group in groups for name in group.failpoints],
        [name for group in groups for name in group.tamper_actions] or None,
    )
    return handlers
