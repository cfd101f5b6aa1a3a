"""Deliberately broken runtimes: the evidence that the kit has teeth.

Each variant is the reference ``Runtime`` with exactly one defect, served by the same
harness (``python -m retryproof.reference_impl --fault NAME``), so a scenario that fails it fails
for that defect and nothing else. Every variant class says in its docstring what it
does wrong and why a runtime could plausibly ship it, and names in ``killed_by`` the
catalogue scenarios that must fail it; ``retryproof selftest`` checks exactly those.

``VARIANTS`` maps the name (the defect, in a few words) to the class.
"""

from __future__ import annotations

from retryproof.reference_impl.faulty.deletes_stalled import DiagnoseDeletesStalled
from retryproof.reference_impl.faulty.digest_ignored import DigestIgnored
from retryproof.reference_impl.faulty.digest_without_nfc import DigestWithoutNfc
from retryproof.reference_impl.faulty.final_receipt_only import FinalReceiptOnly
from retryproof.reference_impl.faulty.fuzzy_subject import FuzzySubjectDedup
from retryproof.reference_impl.faulty.invocation_in_digest import InvocationInDigest
from retryproof.reference_impl.faulty.legacy_idempotent import LegacySaysIdempotent
from retryproof.reference_impl.faulty.memory_dedup import MemoryDedup
from retryproof.reference_impl.faulty.no_directory_fsync import NoDirectoryFsync
from retryproof.reference_impl.faulty.no_idempotency import NoIdempotency
from retryproof.reference_impl.faulty.p3_audit_reclassifies import P3AuditReclassifies
from retryproof.reference_impl.faulty.recovery_new_number import RecoveryNewNumber
from retryproof.reference_impl.faulty.renumbers_stalled import RenumbersStalledOnStart
from retryproof.reference_impl.faulty.report_dedup_lost import ReportDedupLost
from retryproof.reference_impl.faulty.reuse_answers_newest import ReuseAnswersNewest
from retryproof.reference_impl.faulty.stale_marks_succeeded import StaleMarksSucceeded
from retryproof.reference_impl.faulty.unlocked_check_then_create import (
    UnlockedCheckThenCreate,
)
from retryproof.reference_impl.runtime import Runtime

__all__ = ["VARIANTS", "describe", "killed_by"]

VARIANTS: dict[str, type[Runtime]] = {
    "no-idempotency": NoIdempotency,
    "memory-dedup": MemoryDedup,
    "fuzzy-subject-dedup": FuzzySubjectDedup,
    "digest-ignored": DigestIgnored,
    "invocation-in-digest": InvocationInDigest,
    "digest-without-nfc": DigestWithoutNfc,
    "unlocked-check-then-create": UnlockedCheckThenCreate,
    "recovery-new-number": RecoveryNewNumber,
    "renumbers-stalled-on-start": RenumbersStalledOnStart,
    "final-receipt-only": FinalReceiptOnly,
    "diagnose-deletes-stalled": DiagnoseDeletesStalled,
    "legacy-says-idempotent": LegacySaysIdempotent,
    "report-dedup-lost": ReportDedupLost,
    "no-directory-fsync": NoDirectoryFsync,
    "p3-audit-reclassifies": P3AuditReclassifies,
    "stale-marks-succeeded": StaleMarksSucceeded,
    "reuse-answers-newest": ReuseAnswersNewest,
}


def describe(name: str) -> str:
    """The first paragraph of the variant's docstring: its defect in one sentence
    (which may wrap over several lines)."""
    return " ".join((VARIANTS[name].__doc__ or "").strip().split("\n\n")[0].split())


def killed_by(name: str) -> tuple[str, ...]:
    """The catalogue scenarios that must fail the variant ``name``."""
    return tuple(getattr(VARIANTS[name], "killed_by", ()))
