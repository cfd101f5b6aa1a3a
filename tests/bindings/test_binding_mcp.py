"""MCP servers through a binding, end to end with real server processes built with the
official SDK: the reference over stdio and streamable HTTP, and a test server whose
deduplication lives in memory."""

from __future__ import annotations

import pytest
from binding_helpers import HERE, assert_killed_then_retried, needs_mcp_sdk, run_binding, statuses, write_binding


@pytest.fixture(autouse=True, scope="module")
def _mcp_sdk() -> None:
    """Skip without the SDK the servers under test are built with."""
    needs_mcp_sdk()


#: Each server start costs the SDK's import (seconds on a busy machine): the subsets
#: keep restarts few; the HTTP tests cover the rest of what a binding offers. The
#: reference's MCP server is one module whichever wire serves it (only the line that
#: runs the SDK's transport differs), so a scenario runs over one wire unless the wire
#: changes what it does. Stdio takes answers, errors and the protocol's claims, on one
#: start; streamable HTTP its session's calls, an error answer, the races (A4-CONCURRENT;
#: over stdio, test_tool_shapes.py's SDK server races) and the lost answers
#: (A2-RESPONSE-LOSS: withheld and cut by the kit's proxy while the server lives on, so
#: the retries meet the reference's server with the cut call's work in it). Over stdio
#: a lost answer ends the server (its caller leaves: the SDK cancels the call and the
#: server exits), and the reference was started again three times for it: what that
#: exercises of the kit's own is the pipe's loss and the restart, which
#: test_binding_faults.py's claim service over stdio runs (fixed, and failed by
#: ``cancel-leaves-claim``) on a server that starts cheaply. The rest of each wire's own
#: code is test_binding_faults.py's, on the claim service: a restart, graceful and by
#: SIGKILL, passed over stdio (RESTART-REUSE, also the control for the server below
#: that it fails), a kill after an answer withheld on the pipe
#: (A2-CRASH-BEFORE-RESPONSE over stdio) and over streamable HTTP a cut (its
#: KILL-NEMESIS's five kills are a standard-library server's). Over streamable HTTP the
#: reference takes the suite's one SIGKILL of an SDK server, after a withheld answer,
#: whose retry meets the server started again under a new session
#: (A2-CRASH-BEFORE-RESPONSE: one start more; on the claim service it cost two). Else
#: a restart changes nothing of the reference's own (its state is on disk whichever
#: wire serves it; its RESTART-REUSE runs over plain HTTP), and the SDK's server is
#: restarted over stdio below, gracefully (a SIGKILL over stdio is the kit's same code
#: whatever serves: the claim service's).
SUBSETS = {
    "reference-mcp": "WT-CREATE,INVALID-KEY,CONFLICT-DIGEST,NORMALIZED-EQUAL,LEGACY-NO-ID",
    "reference-mcp-http": "WT-CREATE,A4-CONCURRENT,CONFLICT-DIGEST,A2-RESPONSE-LOSS,A2-CRASH-BEFORE-RESPONSE",
}


@pytest.mark.parametrize("binding", sorted(SUBSETS))
def test_the_reference_over_mcp_passes(tmp_path, binding):
    done, report = run_binding(tmp_path, binding, SUBSETS[binding])
    assert statuses(report) == dict.fromkeys(SUBSETS[binding].split(","), "passed"), done.stdout + done.stderr
    assert done.returncode == 0
    scenarios = {scenario["id"]: scenario for scenario in report["scenarios"]}
    if "A2-RESPONSE-LOSS" in scenarios:
        # Lost for real, by the proxy (a connection that cannot lose one passes the scenario by a plain retry).
        losses = scenarios["A2-RESPONSE-LOSS"]["evidence"].get("losses", [])
        assert [loss["fault"] for loss in losses] == ["answer withheld", "cut mid-call", "cut mid-call"], losses
    if "A2-CRASH-BEFORE-RESPONSE" in scenarios:
        assert_killed_then_retried(scenarios["A2-CRASH-BEFORE-RESPONSE"])


def test_an_mcp_server_that_dedups_in_memory_loses_its_dedup_on_restart(tmp_path):
    """Its effects are durable, which key made which lives in memory. While it lives
    its dedup works: REUSE-EARLIER-ID passes (a retry after two later creations answers
    the first ticket, reused, and the listing holds that one ticket under the key),
    which only a key that reached it in ``_meta`` can do. Restarted, it forgets:
    RESTART-REUSE fails it (after a graceful restart the retry makes a second effect).
    Two runs, three server starts (each costs the SDK's import): in one run the
    failure on the server REUSE-EARLIER-ID used would be judged again on a server of
    its own, two starts more."""
    binding = {
        "binding": "retryproof-binding/1",
        "name": "memory-dedup-mcp",
        "transport": "mcp",
        "start": {"command": ["{python}", str(HERE / "mcp_memory_dedup.py")]},
        "call": {
            "tool": "create_ticket",
            "key": {"meta": "idempotencyKey"},
            "task": {
                "fields": {
                    "subject": "title",
                    "body": "description",
                    "sender": "author",
                    "recipient": "assignee",
                    "priority": "priority",
                    "thread_key": "thread",
                    "references": "links",
                }
            },
        },
        "answers": {
            "task_id": "result.ticket",
            "outcomes": [
                {"when": {"isError": False, "result.replayed": False}, "means": "created"},
                {"when": {"isError": False, "result.replayed": True}, "means": "reused"},
            ],
        },
        "listing": {
            "resource": "tickets://all",
            "items": "text.tickets",
            "task_id": "ticket",
            "key": "key",
            "task": "fields",
        },
        "offers": ["legacy"],
    }
    written = write_binding(tmp_path, binding)
    done, report = run_binding(tmp_path / "alive", written, "REUSE-EARLIER-ID")
    assert statuses(report) == {"REUSE-EARLIER-ID": "passed"}, done.stdout + done.stderr
    done, report = run_binding(tmp_path / "restarted", written, "RESTART-REUSE")
    assert statuses(report) == {"RESTART-REUSE": "failed"}, done.stdout + done.stderr
    (reason,) = [scenario["reason"] for scenario in report["scenarios"]]
    assert reason.startswith("retry after a graceful restart: expected disposition reused"), reason
