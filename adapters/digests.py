"""The write-task-v1 digest of tasks the kit meets again and again, computed once each.

A run digests the same tasks many times: the kit's own (a retry sends its task again) and
those a binding's listing answers (every listing lists every task again). The digest is
a function of the task, so it is kept by a text that tells tasks apart exactly: ``key``,
whose exactness each user argues for its own tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retryproof.spec.digest import request_digest


class DigestMemo:
    """``request_digest(task)``, raising ``ContractError`` as it does, computed once per
    distinct ``key(task)``. A task it refuses, or whose key is longer than ``longest``, is
    not kept; cleared when it holds ``most`` (at most about ``most * longest`` characters)."""

    def __init__(self, key: Callable[[Any], str], most: int = 10_000, longest: int = 4096):
        self.key, self.most, self.longest = key, most, longest
        self._digests: dict[str, str] = {}

    def __call__(self, task: Any) -> str:
        key = self.key(task)
        digest = self._digests.get(key)
        if digest is None:
            digest = request_digest(task)
            if len(key) <= self.longest:
                if len(self._digests) >= self.most:
                    self._digests.clear()
                self._digests[key] = digest
        return digest
