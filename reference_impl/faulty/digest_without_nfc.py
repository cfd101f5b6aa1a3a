from __future__ import annotations

import hashlib

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.digest import ARRAY_FIELDS, SCALAR_FIELDS
from retryproof.spec.jcs import canonical_bytes


def _line_endings(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


class DigestWithoutNfc(Runtime):
    """Digests the task without Unicode NFC (line endings are still normalized).

    The same text typed on a system that sends decomposed characters (NFD, as some
    file systems and input methods do) gets another digest, so an honest retry is
    answered with a conflict, and the digests disagree with the golden vectors.
    """

    killed_by = ("NORMALIZED-EQUAL", "WT-DIGEST-VECTORS")

    def _digest(self, task: Any) -> str:
        super()._digest(task)  # the contract's validation, unchanged
        canonical: dict[str, Any] = {
            key: None if task.get(key) is None else _line_endings(task[key]) for key in SCALAR_FIELDS
        }
        canonical.update({key: [_line_endings(item) for item in task.get(key) or []] for key in ARRAY_FIELDS})
        return "sha256:" + hashlib.sha256(canonical_bytes(canonical)).hexdigest()
