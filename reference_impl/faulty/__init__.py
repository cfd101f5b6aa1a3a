"""Deliberately broken runtimes: the evidence that the kit has teeth.

Each variant is the reference ``Runtime`` with exactly one defect, served by the same
harness (``python -m retryproof.reference_impl --fault NAME``), so a scenario that fails it fails
for that defect and nothing else. Every variant class says in its docstring what it
does wrong and why a runtime could plausibly ship it, and names in ``killed_by`` the
catalogue scenarios that must fail it; ``retryproof selftest`` checks exactly those.

``VARIANTS`` maps the name (the defect, in a few words) to the module and class;
``variant(name)`` imports that one module. A harness serves one variant, so it imports
only its own: importing them all (the approval service among them) made every start
of a faulty harness cost half as much again as a start of the reference.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # not typing's: a faulty harness start would pay for importing typing
if TYPE_CHECKING:
    from typing import Any as Any

    from retryproof.reference_impl.runtime import Runtime
else:
    # What the variants import for their annotations, which are never evaluated
    # (``from __future__ import annotations``): so no variant imports typing, nor needs
    # its own TYPE_CHECKING block to avoid it.
    Any = object

__all__ = ["VARIANTS", "describe", "killed_by", "variant"]

VARIANTS: dict[str, tuple[str, str]] = {
    "no-idempotency": ("no_idempotency", "NoIdempotency"),
    "memory-dedup": ("memory_dedup", "MemoryDedup"),
    "fuzzy-subject-dedup": ("fuzzy_subject", "FuzzySubjectDedup"),
    "digest-ignored": ("digest_ignored", "DigestIgnored"),
    "invocation-in-digest": ("invocation_in_digest", "InvocationInDigest"),
    "digest-without-nfc": ("digest_without_nfc", "DigestWithoutNfc"),
    "unlocked-check-then-create": ("unlocked_check_then_create", "UnlockedCheckThenCreate"),
    "recovery-new-number": ("recovery_new_number", "RecoveryNewNumber"),
    "renumbers-stalled-on-start": ("renumbers_stalled", "RenumbersStalledOnStart"),
    "final-receipt-only": ("final_receipt_only", "FinalReceiptOnly"),
    "diagnose-deletes-stalled": ("deletes_stalled", "DiagnoseDeletesStalled"),
    "legacy-says-idempotent": ("legacy_idempotent", "LegacySaysIdempotent"),
    "report-dedup-lost": ("report_dedup_lost", "ReportDedupLost"),
    "no-directory-fsync": ("no_directory_fsync", "NoDirectoryFsync"),
    "p3-audit-reclassifies": ("p3_audit_reclassifies", "P3AuditReclassifies"),
    "stale-marks-succeeded": ("stale_marks_succeeded", "StaleMarksSucceeded"),
    "reuse-answers-newest": ("reuse_answers_newest", "ReuseAnswersNewest"),
}


def variant(name: str) -> type[Runtime]:
    """The ``Runtime`` subclass of the variant ``name``, its module imported now."""
    module, attribute = VARIANTS[name]
    return getattr(import_module(f"{__name__}.{module}"), attribute)


def describe(name: str) -> str:
    """The first paragraph of the variant's docstring: its defect in one sentence
    (which may wrap over several lines)."""
    return " ".join((variant(name).__doc__ or "").strip().split("\n\n")[0].split())


def killed_by(name: str) -> tuple[str, ...]:
    """The catalogue scenarios that must fail the variant ``name``."""
    return tuple(getattr(variant(name), "killed_by", ()))
