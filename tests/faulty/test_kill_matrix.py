"""The kit has teeth: each bundled faulty runtime fails the scenarios its variant
declares as killers, and the reference passes those same scenarios (a scenario
that fails everything would prove nothing).

This runs the targeted subset; ``retryproof selftest`` runs the whole matrix.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

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
    killers = sorted({scenario_id for runtime in runtimes for scenario_id in runtime.killed_by} - {"FUZZ-MODEL"})
    # The reference runs every killer scenario but FUZZ-MODEL, whose full budget on a
    # clean runtime belongs to the selftest, not to the unit suite.
    reference = replace(runtimes[0], killed_by=tuple(killers))
    outcomes = run_all([reference, *runtimes[1:]], seed=0, only_killers=True)
    problems = [problem for runtime in runtimes for problem in judge(runtime, outcomes[runtime.name])]
    assert outcomes[REFERENCE]["results"], "the reference ran nothing"
    for runtime in runtimes[1:]:
        assert set(outcomes[runtime.name]["results"]) == set(runtime.killed_by), (
            f"{runtime.name} did not run all its killers"
        )
    assert problems == []
