"""A program the kit itself needs (``tool:`` in a scenario's needs) is missing from the
machine: the scenario is not verified, and its reason sends the user to install it
instead of blaming the runtime, which provides every need of its own."""

from __future__ import annotations

import os
import shlex

from kit import REFERENCE, by_id, certify


def test_without_strace_on_path_the_machine_is_named_not_the_runtime(tmp_path):
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    done, report = certify(
        tmp_path / "out",
        shlex.join(REFERENCE),
        "--only",
        "CRASH-POINTS,DURABILITY-TRACE,WT-CREATE",
        in_process=True,
        env={**os.environ, "PATH": str(no_tools)},
    )
    scenarios = by_id(report)
    for scenario_id in ("CRASH-POINTS", "DURABILITY-TRACE"):
        assert scenarios[scenario_id]["status"] == "skipped"
        assert scenarios[scenario_id]["reason"] == (
            "this machine has no strace on PATH, which the kit needs here (install strace)"
        )
    assert scenarios["WT-CREATE"]["status"] == "passed"
    assert "not verified: this machine has no strace" in done.stdout, done.stdout
