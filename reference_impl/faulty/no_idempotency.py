from __future__ import annotations

from collections.abc import Mapping

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.faulty.unguarded import create_unguarded
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.digest import check_submission_id


class NoIdempotency(Runtime):
    """Every call creates a task: the submission id is accepted and ignored.

    The first field report's historical write_task: a retry after a lost response
    made a second task with a new identity. The id travels, but nothing durable
    binds it to the first result.
    """

    killed_by = ("A2-RESPONSE-LOSS", "A4-CONCURRENT", "RESTART-REUSE")

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        if client_submission_id is None:
            return super().write_task(task, None, invocation)
        check_submission_id(client_submission_id)
        return create_unguarded(self, client_submission_id, task, self._digest(task))
