"""The kit has teeth: each bundled faulty runtime fails the scenarios its variant
declares as killers. That the reference passes those same scenarios (a scenario that
fails everything would prove nothing) is tests/conformance/test_reference_run.py's
whole-catalogue run; ``retryproof selftest`` checks both together.
"""

from __future__ import annotations

import sys

import pytest
from kit import by_id, certify

from retryproof.conformance.commands.selftest import (
    REFERENCE,
    bundled_runtimes,
    judge,
    run_all,
)


@pytest.fixture(scope="module")
def runtimes():
    return bundled_runtimes()


def test_every_variant_declares_catalogue_killers(runtimes):
    names = [runtime.name for runtime in runtimes]
    assert names[0] == REFERENCE and len(names) == len(set(names)) > 13
    for runtime in runtimes[1:]:
        assert runtime.killed_by and runtime.defect


def test_each_faulty_runtime_is_killed_by_its_declared_scenarios(runtimes):
    faulty = runtimes[1:]
    outcomes = run_all(faulty, seed=0)
    problems = [problem for runtime in faulty for problem in judge(runtime, outcomes[runtime.name])]
    for runtime in faulty:
        assert set(outcomes[runtime.name]["results"]) == set(runtime.killed_by), (
            f"{runtime.name} did not run all its killers"
        )
    assert problems == []


def test_a_reuse_naming_the_newest_task_is_caught_only_where_the_reused_task_is_not_the_newest(tmp_path):
    """The teeth gap REUSE-EARLIER-ID closes: everywhere else the reused task is also
    the newest, so the variant answering reuse with the newest task passes there."""
    only = "A2-RESPONSE-LOSS,RESTART-REUSE,INVOCATION-FIELDS-IGNORED,REUSE-EARLIER-ID"
    harness = f"{sys.executable} -m retryproof.reference_impl --fault reuse-answers-newest"
    done, report = certify(tmp_path, harness, "--only", only, in_process=True)  # how it is judged, not the process
    scenarios = by_id(report)
    assert {sid: s["status"] for sid, s in scenarios.items()} == {
        "A2-RESPONSE-LOSS": "passed",
        "RESTART-REUSE": "passed",
        "INVOCATION-FIELDS-IGNORED": "passed",
        "REUSE-EARLIER-ID": "failed",
    }
    assert "durable state holds" in scenarios["REUSE-EARLIER-ID"]["reason"]
    assert done.returncode == 1
