"""Faults over a binding that do not depend on luck, proved on the claim services
(claim_store.py served by claim_http.py and claim_mcp.py): the fixed store passes
every fault scenario, and each broken one is caught by the scenario aimed at its
defect, over HTTP, MCP stdio and MCP streamable HTTP. A few seeds each here (the
machine is shared); benchmarks/bench_faults.py runs seeds 1-20."""

from __future__ import annotations

import json

import pytest
from binding_helpers import claim_binding, run_binding, run_cli, statuses, write_binding

#: Each defect and the scenarios aimed at it (claim_store.py says what each breaks).
CAUGHT_BY = {
    "cancel-leaves-claim": ("A2-RESPONSE-LOSS",),
    "cancel-marks-unknown": ("A2-RESPONSE-LOSS",),
    "pending-after-kill": ("CRASH-POINTS", "KILL-NEMESIS"),
    "lease-reclaims": ("CRASH-POINTS", "KILL-NEMESIS"),
    "torn-response": ("CRASH-POINTS",),
}
FAULTS = "A2-RESPONSE-LOSS,A2-CRASH-BEFORE-RESPONSE,KILL-NEMESIS,CRASH-POINTS"
#: Over MCP a server start costs the SDK's import (seconds on a busy machine), and
#: CRASH-POINTS starts it twice per point: here it runs over HTTP, and over MCP stdio
#: for the one defect only it catches; the benchmark runs it over every wire.
MCP_FAULTS = "A2-RESPONSE-LOSS,A2-CRASH-BEFORE-RESPONSE,KILL-NEMESIS"


def _needs_mcp(wire: str) -> None:
    if wire.startswith("mcp"):
        pytest.importorskip("mcp.server.mcpserver", reason="the claim MCP server needs the mcp SDK")


def _run(tmp_path, wire: str, defect: str, only: str, seed: int):
    binding = write_binding(tmp_path, claim_binding(wire, defect))
    return run_binding(tmp_path, binding, only, "--call-timeout", "3", seed=seed)


@pytest.mark.parametrize(("wire", "seed"), [("http", 1), ("http", 2), ("mcp-stdio", 1), ("mcp-http", 1)])
def test_the_fixed_claim_service_passes_every_fault_scenario(tmp_path, wire, seed):
    _needs_mcp(wire)
    only = FAULTS if wire == "http" else MCP_FAULTS
    done, report = _run(tmp_path, wire, "", only, seed)
    assert statuses(report) == dict.fromkeys(only.split(","), "passed"), done.stdout + done.stderr
    by_id = {scenario["id"]: scenario for scenario in report["scenarios"]}
    losses = by_id["A2-RESPONSE-LOSS"]["evidence"]["losses"]
    assert [loss["fault"] for loss in losses] == ["answer withheld", "cut mid-call", "cut mid-call"]
    assert losses[0]["listed_before_retry"] is True  # withheld: the effect was made
    rounds = by_id["KILL-NEMESIS"]["evidence"]["schedule"]["rounds"]
    assert [r["window"] for r in rounds] == ["claim -> effect", "effect -> answer"] * 2 + ["claim -> effect"]
    if wire == "http":
        points = by_id["CRASH-POINTS"]["evidence"]["points"]
        # claim, effect, response, done: each a create, a write and a rename
        assert len(points) == 12 and all(point["outcome"] == "one effect" for point in points), points


CASES = [("http", defect, seed) for defect in CAUGHT_BY for seed in (1, 2)]
CASES += [(wire, defect, 1) for wire in ("mcp-stdio", "mcp-http") for defect in CAUGHT_BY if defect != "torn-response"]
CASES += [("mcp-stdio", "torn-response", 1)]


@pytest.mark.parametrize(("wire", "defect", "seed"), CASES)
def test_each_defect_is_caught_by_the_scenarios_aimed_at_it(tmp_path, wire, defect, seed):
    _needs_mcp(wire)
    aimed = CAUGHT_BY[defect]
    if wire != "http" and defect != "torn-response":
        aimed = tuple(scenario for scenario in aimed if scenario != "CRASH-POINTS")
    done, report = _run(tmp_path, wire, defect, ",".join(aimed), seed)
    assert statuses(report) == dict.fromkeys(aimed, "failed"), done.stdout + done.stderr
    assert done.returncode == 1


def test_a_failing_crash_point_replays_exactly(tmp_path):
    """The replay file of CRASH-POINTS names the first failing point; ``retryproof
    replay`` runs that one point again and it fails again."""
    binding = write_binding(tmp_path, claim_binding("http", "torn-response"))
    done, report = run_binding(tmp_path, binding, "CRASH-POINTS", "--call-timeout", "3", seed=3)
    (scenario,) = report["scenarios"]
    assert scenario["status"] == "failed", done.stdout
    # a write of the response, which leaves it torn
    assert scenario["reproduce"].startswith("RETRYPROOF_CRASH_POINT=write:"), scenario["reproduce"]
    (replay,) = (tmp_path / "out" / "replays").iterdir()
    document = json.loads(replay.read_text(encoding="utf-8"))
    assert document["scenario"] == "CRASH-POINTS" and document["seed"] == 3
    again = run_cli("replay", str(replay), "--binding", str(binding))
    assert again.returncode == 1 and "REPRODUCED" in again.stdout, again.stdout + again.stderr
    assert "1 of 1 crash points broke the write" in again.stdout  # that point alone
