"""MCP servers through a binding, end to end with real server processes built with the
official SDK: the reference over stdio and streamable HTTP, and a test server whose
deduplication lives in memory."""

from __future__ import annotations

import pytest
from binding_helpers import HERE, run_binding, statuses, write_binding


@pytest.fixture(autouse=True, scope="module")
def _mcp_sdk() -> None:
    """Skip without the SDK. A fixture, not a module-level importorskip: importing the SDK
    takes most of a second, and at module level every pytest-xdist worker paid it while
    collecting, whether or not it was dealt one of these tests."""
    pytest.importorskip(
        "mcp.server.mcpserver", reason="the MCP servers under test need the mcp SDK: pip install 'retryproof[mcp]'"
    )


#: Each server start costs the SDK's import (seconds on a busy machine): the subsets
#: keep restarts few; the HTTP tests cover the rest of what a binding offers. The
#: reference's MCP server is one module whichever wire serves it (only the line that
#: runs the SDK's transport differs), so a scenario runs over one wire unless the wire
#: changes what it does. Stdio takes answers, errors, the protocol's claims, a lost
#: answer (its caller leaves: the SDK cancels the call and the server exits) and a
#: restart, graceful and by SIGKILL (RESTART-REUSE, also the control for the server
#: below that it fails); streamable HTTP its session's calls, an error answer and the
#: races (A4-CONCURRENT; over stdio, test_tool_shapes.py's SDK server races). The rest
#: of each wire's own code is test_binding_faults.py's, on the claim service: a kill
#: after an answer withheld on the pipe (A2-CRASH-BEFORE-RESPONSE over stdio), and over
#: streamable HTTP a cut, a kill and a new session on a new server (KILL-NEMESIS kills
#: its SDK server there five times, starts it again on its state each time, then
#: retries every key it sent until each answers its one effect). A restart changes
#: nothing of the reference's own (its state is on disk whichever wire serves it), and
#: a graceful stop over streamable HTTP is SIGTERM to the server's group, as over plain
#: HTTP, where the reference's RESTART-REUSE runs.
SUBSETS = {
    "reference-mcp": "WT-CREATE,INVALID-KEY,A2-RESPONSE-LOSS,RESTART-REUSE,CONFLICT-DIGEST,NORMALIZED-EQUAL,LEGACY-NO-ID",
    "reference-mcp-http": "WT-CREATE,A4-CONCURRENT,CONFLICT-DIGEST",
}


@pytest.mark.parametrize("binding", sorted(SUBSETS))
def test_the_reference_over_mcp_passes(tmp_path, binding):
    done, report = run_binding(tmp_path, binding, SUBSETS[binding])
    assert statuses(report) == dict.fromkeys(SUBSETS[binding].split(","), "passed"), done.stdout + done.stderr
    assert done.returncode == 0


def test_an_mcp_server_that_dedups_in_memory_loses_its_dedup_on_restart(tmp_path):
    """Its effects are durable, which key made which lives in memory: RESTART-REUSE
    fails it over MCP (after a graceful restart the retry makes a second effect), and
    without failpoints the kill nemesis finds the keys a restart forgot. One run for
    both: each start of this server costs the SDK's import."""
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
    done, report = run_binding(tmp_path, write_binding(tmp_path, binding), "WT-CREATE,RESTART-REUSE,KILL-NEMESIS")
    assert statuses(report) == {"WT-CREATE": "passed", "RESTART-REUSE": "failed", "KILL-NEMESIS": "failed"}, (
        done.stdout + done.stderr
    )
    reasons = {scenario["id"]: scenario["reason"] for scenario in report["scenarios"]}
    assert "retry after a graceful restart: expected disposition reused" in reasons["RESTART-REUSE"], reasons
    # The set checker sees more effects than keys.
    assert "second task for one id" in reasons["KILL-NEMESIS"] or "new task(s)" in reasons["KILL-NEMESIS"], reasons
