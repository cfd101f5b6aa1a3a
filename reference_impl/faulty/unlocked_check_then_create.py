from __future__ import annotations

import contextlib
from collections.abc import Iterator

from retryproof.reference_impl.runtime import Runtime


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
