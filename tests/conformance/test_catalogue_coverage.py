"""Every catalogue id has a scenario, except those other issues still own; the set of
missing ids can only shrink."""

from retryproof.conformance.scenarios import missing_ids, registry

# Owned by the approval issue and the faulty-runtimes issue; remove ids as they land.
OWNED_ELSEWHERE = {
    "P0-CONSUMED",
    "P1-APPROVAL-AUDIT-FAULT",
    "P2-START-AUDIT-FAULT",
    "P3-COMPLETION-AUDIT-FAULT",
    "RECOVERY-STALE-REQUEST",
    "RECOVERY-UNKNOWN-EFFECT",
    "FUZZ-MODEL",
    "DURABILITY-TRACE",
}


def test_only_ids_owned_elsewhere_are_missing():
    assert set(missing_ids()) <= OWNED_ELSEWHERE


def test_every_registered_function_is_callable():
    assert all(callable(function) for function in registry().values())
