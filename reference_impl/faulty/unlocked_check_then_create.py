from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime

#: The gap between the check and the reservation: one round trip to a store (a database
#: across the network, a cache). The reference's own journal answers both a few
#: microseconds apart, which would make the race rare, not absent.
CHECK_TO_RESERVE_S = 0.005


class UnlockedCheckThenCreate(Runtime):
    """Checks for a receipt, then reserves, with no lock between the two.

    Sequentially it is perfect. Under a race, every caller sees "no receipt yet",
    each reserves its own task number (the last reservation line read wins, since
    nothing made the first one exclusive) and each writes a task: two or more tasks for one id.
    """

    killed_by = ("A4-CONCURRENT", "A4-MULTIPROCESS")

    @contextlib.contextmanager
    def _acquire(self, submission_id: str) -> Iterator[None]:
        yield

    def _reserve(self, submission_id: str, digest: str, task: Any) -> dict[str, Any]:
        time.sleep(CHECK_TO_RESERVE_S)
        return super()._reserve(submission_id, digest, task)
