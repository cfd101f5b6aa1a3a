"""The Python host: certify a runtime written in Python without writing a harness.

A vendor implements ``HostedRuntime`` and names a factory, ``module:factory``::

    retryproof run --python my_runtime.harness:make_runtime

The kit then runs ``python -m retryproof.adapters.python_host my_runtime.harness:make_runtime``
as an ordinary harness process, which serves ``retryproof-harness/1`` with
``retryproof.spec.protocol.serve``. The runtime therefore lives in a real OS process: SIGKILL and
restart on the same state directory are as real as for any other harness.

The interface, in full:

- ``factory(state_dir: str, failpoints: dict[str, str]) -> HostedRuntime`` is called
  once per process start. ``state_dir`` holds all durable state; ``failpoints`` maps a
  failpoint name to ``crash`` or ``fail`` (call ``HostedRuntime.failpoint(name)`` at
  that point in the code).
- The object has ``implementation`` (``{"name", "version", "language"}``),
  ``capabilities`` and ``failpoints`` (the names it supports), optionally
  ``tamper_actions`` (the tamper actions it performs, when not all three), and one method per
  protocol op it serves, named after the op and taking the op's args as keyword
  arguments: ``write_task(self, task, client_submission_id=None, invocation=None)``,
  ``list_tasks(self)``, ``read_task(self, task_id)``, ``diagnose(...)`` and so on,
  each returning the result object of ``spec/schemas/harness-response.json``.
  ``client_submission_id=None`` means *absent* (the legacy path): the host itself
  answers an explicit JSON null id with ``invalid_submission_id``, as the spec
  requires, so a method never sees null and absent as one.
- A rejection is raised as ``retryproof.spec.protocol.ProtocolError(code, message)`` or
  ``retryproof.spec.digest.ContractError``; an ``OSError`` becomes ``io_error``. ``hello`` and
  ``shutdown`` are served by the host.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from retryproof.spec.digest import check_submission_id
from retryproof.spec.protocol import (
    ProtocolError,
    crash_now,
    hello_handler,
    parse_failpoints,
    serve,
)

FACTORY_FORMAT = "module:factory"
#: Ops the host answers itself; every other op is looked up on the runtime object.
HOST_OPS = ("hello", "shutdown")


class HostedRuntime:
    """Base class of a hosted runtime (subclassing is optional; the shape is what counts)."""

    implementation: Mapping[str, str] = {"name": "unnamed", "version": "0", "language": "python"}
    capabilities: tuple[str, ...] = ("write_task",)
    failpoints: tuple[str, ...] = ()

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        self.state_dir = state_dir
        self.armed_failpoints = dict(failpoints)

    def failpoint(self, name: str) -> None:
        """Call at a failpoint: ``crash`` SIGKILLs this process, ``fail`` raises the
        native I/O error, no action does nothing."""
        action = self.armed_failpoints.get(name)
        if action == "crash":
            crash_now()
        elif action == "fail":
            raise OSError(5, f"failpoint {name}")


def load_factory(reference: str) -> Callable[..., Any]:
    """Import ``module:factory``; raise ``ValueError`` with a readable reason."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{reference!r} is not of the form {FACTORY_FORMAT}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise ValueError(f"{module_name!r} has no callable {attribute!r}")
    return factory


def built(factory: Callable[..., Any], reference: str, state_dir: str, armed: Mapping[str, str]) -> Any:
    """``factory(state_dir, armed)``; whatever it raises (a factory of another
    signature, ``os:getcwd``; a vendor's own error) becomes a ``ValueError`` naming the
    call, as an import error does: the host's traceback would say nothing to its reader."""
    try:
        return factory(state_dir, armed)
    except Exception as exc:
        raise ValueError(f"{reference}(state_dir, failpoints) failed: {type(exc).__name__}: {exc}") from None


def handlers_for(runtime: Any) -> dict[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]:
    """The ``serve`` handler table: ``hello`` from the runtime's declarations, and
    one handler per public method, which binds the request args as keyword
    arguments (args that do not fit the signature are ``invalid_request``)."""

    def bound(method: Callable[..., Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
        signature = inspect.signature(method)

        def handle(args: Mapping[str, Any]) -> Mapping[str, Any]:
            if "client_submission_id" in args and args["client_submission_id"] is None:
                check_submission_id(None)  # raises invalid_submission_id: null is never the legacy path
            try:
                call = signature.bind(**args)
            except TypeError as exc:
                raise ProtocolError("invalid_request", f"arguments do not fit {method.__name__}: {exc}") from None
            return method(*call.args, **call.kwargs)

        return handle

    table: dict[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {
        "hello": hello_handler(
            runtime.implementation,
            runtime.capabilities,
            runtime.failpoints,
            getattr(runtime, "tamper_actions", None),
        )
    }
    for name, member in inspect.getmembers(runtime, inspect.ismethod):
        if not name.startswith("_") and name not in HOST_OPS and name != "failpoint":
            table[name] = bound(member)
    return table


def check_armed(armed: Mapping[str, str], supported: Any) -> None:
    """Refuse (``ValueError``) a failpoint the runtime does not list in hello: served
    anyway, the window would go untested while the kit believes it was (spec
    PROTOCOL-R18). Both actions are the host's own ``failpoint``."""
    unknown = sorted(set(armed) - set(supported or ()))
    if unknown:
        raise ValueError(
            f"RETRYPROOF_FAILPOINTS names {', '.join(unknown)}, which this runtime does not list in its failpoints"
        )


def serve_hosted(runtime_class: Any, label: str) -> int:
    """The ``main`` of a harness script that hosts one ``HostedRuntime`` class (the
    bundled implementations'): refuse unknown failpoints before anything starts, build
    the runtime in the kit's state directory, serve until EOF or ``shutdown``. A runtime
    that must start or stop something around serving (a DBOS launch, a child server)
    gives a ``_serving()`` context manager; private, so it is no protocol op."""
    try:
        armed = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
        check_armed(armed, runtime_class.failpoints)
        runtime = runtime_class(os.environ["RETRYPROOF_STATE_DIR"], armed)
    except (ValueError, KeyError, RuntimeError) as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    with getattr(runtime, "_serving", contextlib.nullcontext)():
        serve(handlers_for(runtime))
    return 0


def host_command(reference: str) -> list[str]:
    """The harness command line that hosts ``module:factory``."""
    return [sys.executable, "-m", "retryproof.adapters.python_host", reference]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(f"usage: python -m retryproof.adapters.python_host {FACTORY_FORMAT}", file=sys.stderr)
        return 2
    # The vendor's module is found from the directory the kit was started in: the kit
    # puts that directory on PYTHONPATH (the harness itself runs in a scratch directory).
    try:
        factory = load_factory(argv[0])
        armed = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
        runtime = built(factory, argv[0], os.environ["RETRYPROOF_STATE_DIR"], armed)
        check_armed(armed, runtime.failpoints)
    except (ValueError, KeyError) as exc:
        print(f"retryproof python host: {exc}", file=sys.stderr)
        return 2
    serve(handlers_for(runtime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
