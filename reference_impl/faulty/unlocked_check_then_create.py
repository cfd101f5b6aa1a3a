from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from retryproof.reference_impl import durable
from retryproof.reference_impl.runtime import Runtime


class UnlockedCheckThenCreate(Runtime):
    """Checks for a receipt, then reserves, with no lock between the two.

    Sequentially it is perfect. Under a race, every caller sees "no receipt yet",
    each reserves its own task number (the reservation overwrites instead of being
    an exclusive create) and each writes a task: two or more tasks for one id.
    """

    killed_by = ("A4-CONCURRENT", "A4-MULTIPROCESS")

    @contextlib.contextmanager
    def _acquire(self, submission_id: str) -> Iterator[None]:
        yield

    def _write_receipt(self, receipt: Mapping[str, Any], new: bool) -> None:
        path = self._confined("receipts", receipt["client_submission_id"] + ".json")
        durable.replace(path, durable.dump(receipt), self._fsync_directory)
