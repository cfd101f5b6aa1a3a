"""The reference's write_task as a service answers it, shared by ``--http`` and ``--mcp``.

One submission gets one answer whatever the wire: a status in the sense of the IETF
``Idempotency-Key`` draft (201 created, 200 a replay of the first result, 422 the key
reused with another payload, 409 the first request with the key still in flight,
400 a malformed key or task, 500 an I/O failure whose effect is unknown) and a JSON
body: the creation result, or ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.digest import ContractError
from retryproof.spec.protocol import ProtocolError

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every start of --http
if TYPE_CHECKING:
    from typing import Any

STATUS = {"created": 201, "reused": 200, "conflict": 422}
ERROR_STATUS = {"invalid_request": 400, "invalid_submission_id": 400, "in_progress": 409}


def submit(runtime: Runtime, task: Any, key: str | None) -> tuple[int, dict[str, Any]]:
    """(status, body) of one write_task; ``key`` None is the legacy path."""
    try:
        result = runtime.write_task(task, key)
    except (ContractError, ProtocolError) as exc:
        return ERROR_STATUS.get(exc.code, 500), error(exc.code, str(exc))
    except OSError as exc:
        return 500, error("io_error", f"{type(exc).__name__}: {exc}")
    return STATUS[result["disposition"]], result


def error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def listing(runtime: Runtime) -> dict[str, Any]:
    """Every task on disk with its key and stored task: the authoritative listing."""
    fields = ("task_id", "client_submission_id", "task")
    return {"tasks": [{name: entry[name] for name in fields} for entry in runtime.list_tasks(with_task=True)["tasks"]]}
