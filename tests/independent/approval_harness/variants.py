#!/usr/bin/env python3
"""One-change defects of the independent approval runtime, each a kit hole a vendor
found: the kit must fail every one of them.

``variants.py NAME`` serves ``harness.py --mode correct`` with exactly one method
changed. Like the harness, it is standard library only and imports nothing of this
repository but its sibling file.
"""

import errno
import sys

import harness  # the sibling file: a script's folder is the first place its imports look


class OneShotFail(harness.Runtime):
    """A ``fail`` failpoint fires once per process, then the step succeeds: the window
    the kit meant to test is never reached for the second operation."""

    def reach(self, point):
        if self.failpoints.get(point) == "fail":
            del self.failpoints[point]
            raise OSError(errno.EIO, f"failpoint {point}")
        super().reach(point)


class PlainCrashReadsAbsent(harness.Runtime):
    """After a crash, a plain executor's effect that the record does not name is taken as absent."""

    def _effect_evidence(self, op):
        evidence = super()._effect_evidence(op)
        return "absent" if evidence == "present" and not op["effect_id"] else evidence


class DedupeNeverDedupes(harness.Runtime):
    """The "dedupe" executor makes a new effect on every call."""

    def _run_executor(self, op):
        return super()._run_executor(dict(op, executor="plain"))


class StaleOnlyOnceDispatched(harness.Runtime):
    """The recalculated request is compared only once something was dispatched."""

    def op_recover(self, operation_id, request=...):
        if not self._load(operation_id)["dispatched"]:
            request = ...
        return super().op_recover(operation_id, request)


class AuditPendingNeverShown(harness.Runtime):
    """get_operation always says no audit is pending."""

    def op_get_operation(self, operation_id):
        return dict(super().op_get_operation(operation_id), audit_pending=False)


class StaleDemotesSucceeded(harness.Runtime):
    """A stale recovery turns a succeeded operation into stale."""

    def op_recover(self, operation_id, request=...):
        result = super().op_recover(operation_id, request)
        if result == {"outcome": "stale", "state": "succeeded"}:
            self._save(self._load(operation_id), state="stale")
            result = {"outcome": "stale", "state": "stale"}
        return result


class RepairForgetsTheLine(harness.Runtime):
    """A repair drops the owed event from the record without appending its line:
    audit_pending reads false, and the step's audit is lost for good."""

    def _repair_audits(self, op):
        owed = list(op["audit_pending"])
        self._save(op, audit_pending=[])
        return bool(owed)


VARIANTS = {
    "one-shot-fail": OneShotFail,
    "plain-crash-reads-absent": PlainCrashReadsAbsent,
    "dedupe-never-dedupes": DedupeNeverDedupes,
    "stale-only-once-dispatched": StaleOnlyOnceDispatched,
    "audit-pending-never-shown": AuditPendingNeverShown,
    "stale-demotes-succeeded": StaleDemotesSucceeded,
    "repair-forgets-the-line": RepairForgetsTheLine,
}


def main(argv):
    if len(argv) != 1 or argv[0] not in VARIANTS:
        print(f"usage: variants.py {{{','.join(VARIANTS)}}}", file=sys.stderr)
        return 2
    # harness.main builds harness.Runtime: swap in the variant for this process only.
    harness.Runtime = VARIANTS[argv[0]]
    return harness.main(["--mode", "correct"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
