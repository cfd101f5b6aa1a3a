"""The approval executors and the world they act on.

An executor's effect is a synthetic marker file in an isolated ``effects/`` folder
under the state directory, one folder per operation key: nothing remote is ever
touched. The marker files are the ground truth the kit counts (``list_effects``);
what the *runtime* may learn from them after a crash depends on the executor kind.
"""

from __future__ import annotations

import os
import time

from retryproof.reference_impl import durable
from retryproof.reference_impl.approval_store import append_line

__all__ = ["EXECUTORS", "EffectsDir", "ExecutorKind", "key_slug"]


def key_slug(operation_key: str) -> str:
    """A file-name-safe, fixed-length stand-in for any operation key."""
    import hashlib  # on first use: see spec.digest.request_digest

    return hashlib.sha256(operation_key.encode("utf-8")).hexdigest()[:32]


class ExecutorKind:
    """What recovery may rely on for one kind of executor. (A plain class: see
    ``spec.protocol`` on why not a dataclass, and typing's ``NamedTuple`` would load
    typing at the first approval call.)"""

    __slots__ = ("name", "observable", "dedupes")

    def __init__(self, name: str, observable: bool, dedupes: bool) -> None:
        self.name = name
        # The runtime can look up the effect of an operation key after a crash.
        self.observable = observable
        # A repeated call with one operation key makes no second effect.
        self.dedupes = dedupes


EXECUTORS = {
    kind.name: kind
    for kind in (
        ExecutorKind("plain", observable=True, dedupes=False),
        # Its dedupe lives inside the executor; the runtime sees nothing of its state.
        ExecutorKind("dedupe", observable=False, dedupes=True),
        ExecutorKind("opaque", observable=False, dedupes=False),
    )
}


class EffectsDir:
    """Markers (``E1.json``, ``E2.json``, ...) and a durable call log per operation key."""

    def __init__(self, root: str):
        self.root = os.path.join(root, "effects")
        durable.make_directory(self.root)

    def _folder(self, operation_key: str) -> str:
        # Hashed, so any key names a folder that stays inside effects/.
        return os.path.join(self.root, key_slug(operation_key))

    def run(self, kind: ExecutorKind, operation_key: str, operation_id: str) -> tuple[str, bool]:
        """Invoke the executor once: ``(effect_id, deduplicated)``.

        The call is logged durably before anything else, so ``calls`` counts every
        invocation, deduplicated ones and ones cut short by a crash included.
        """
        folder = self._folder(operation_key)
        durable.make_directory(folder)
        append_line(
            os.path.join(folder, "calls.jsonl"),
            {"operation_id": operation_id, "executor": kind.name, "at": time.time()},
        )
        existing = self.effects(operation_key)
        if kind.dedupes and existing:
            return existing[0], True
        return self._make_marker(folder, operation_key, operation_id, len(existing) + 1), False

    def _make_marker(self, folder: str, operation_key: str, operation_id: str, number: int) -> str:
        # An exclusive create of a complete file: a crash can never leave a torn
        # (or empty) marker that would count as an effect.
        body = durable.dump({"operation_key": operation_key, "operation_id": operation_id})
        while True:
            effect_id = f"E{number}"
            try:
                durable.create_new(os.path.join(folder, f"{effect_id}.json"), body)
                return effect_id
            except FileExistsError:
                number += 1

    def effects(self, operation_key: str) -> list[str]:
        """The effect ids of one key, oldest first: the authoritative count."""
        try:
            names = os.listdir(self._folder(operation_key))
        except FileNotFoundError:
            return []
        ids = [name[: -len(".json")] for name in names if name.startswith("E") and name.endswith(".json")]
        return sorted(ids, key=lambda effect_id: int(effect_id[1:]))

    def calls(self, operation_key: str) -> int:
        try:
            with open(os.path.join(self._folder(operation_key), "calls.jsonl"), "rb") as handle:
                return len(handle.read().splitlines())
        except FileNotFoundError:
            return 0

    def observe(self, kind: ExecutorKind, operation_key: str) -> str:
        """The runtime's view of the effect: present, absent, or unknown (not observable)."""
        if not kind.observable:
            return "unknown"
        return "present" if self.effects(operation_key) else "absent"
