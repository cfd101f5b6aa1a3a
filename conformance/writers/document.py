"""The run as one JSON document: the content of report.json, valid against
``spec/schemas/report.json``. Markdown and JUnit render the same events their own way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retryproof.conformance.catalogue import entry
from retryproof.conformance.events import RunFinished, ScenarioResult

REPORT_FORMAT = 1


def scenario_document(result: ScenarioResult) -> dict[str, Any]:
    item = result.entry
    return {
        "id": item.id,
        "title": item.title,
        "level": item.level,
        "checks": list(item.checks),
        "checklist": list(item.checklist),
        "needs": list(item.needs),
        "status": result.status,
        "baseline": result.baseline,
        "reason": result.reason,
        "duration_s": round(result.duration_s, 3),
        "reproduce": result.reproduce,
        "evidence": dict(result.evidence),
        "calls": [dict(call) for call in result.calls],
        "stderr": result.stderr,
    }


def scenario_result(document: Mapping[str, Any]) -> ScenarioResult:
    """The inverse of ``scenario_document``: a scenario of a report.json (a shard's, an
    xdist worker's) as the runner's result, for the writers and the verdict."""
    return ScenarioResult(
        entry=entry(document["id"]),
        status=document["status"],
        reason=document["reason"],
        duration_s=document["duration_s"],
        reproduce=document["reproduce"],
        evidence=document["evidence"],
        calls=tuple(document["calls"]),
        stderr=document["stderr"],
        baseline=document["baseline"],
    )


def report_document(run: RunFinished) -> dict[str, Any]:
    info, verdict = run.info, run.verdict
    counts = {status: 0 for status in ("passed", "failed", "error", "skipped", "not_applicable")}
    for result in run.results:
        counts[result.status] += 1
    return {
        "report_format": REPORT_FORMAT,
        "kit": {"name": "retryproof", "version": info.kit_version},
        "spec_version": info.spec_version,
        **({"spec_fingerprint": info.spec_fingerprint} if info.spec_fingerprint else {}),
        "protocol": info.protocol,
        "implementation": dict(info.implementation),
        "target": info.target,
        "black_box": info.black_box,
        "capabilities": list(info.capabilities),
        "failpoints": list(info.failpoints),
        "seed": info.seed,
        "concurrency": info.concurrency,
        "started_at": info.started_at,
        "duration_s": round(run.duration_s, 3),
        "baseline": info.baseline,
        "environment": {
            "python": info.python,
            "platform": info.platform,
            "harness_command": info.harness_command,
        },
        "selection": {"only": list(info.only), "skip": list(info.skip)},
        "shard": None if info.shard is None else {"index": info.shard.index, "count": info.shard.count},
        "verdict": {
            "conformant": verdict.conformant,
            "complete": verdict.complete,
            "headline": verdict.headline,
            "exit_code": verdict.exit_code,
            "blocking": [{"id": scenario_id, "why": why} for scenario_id, why in verdict.blocking],
            "warnings": [{"id": scenario_id, "why": why} for scenario_id, why in verdict.warnings],
            "not_covered": [{"id": scenario_id, "why": why} for scenario_id, why in verdict.not_covered],
            "needs_harness": [{"id": scenario_id, "why": why} for scenario_id, why in verdict.needs_harness],
            "tool_paths": dict(verdict.tool_paths),
            "expected_failures": list(verdict.expected_failures),
            "stale_baseline": list(verdict.stale_baseline),
        },
        "counts": counts,
        "checklist": [
            {
                "id": answer.question,
                "question": answer.text,
                "answer": answer.answer,
                "scenarios": [{"id": scenario_id, "status": status} for scenario_id, status in answer.scenarios],
            }
            for answer in verdict.checklist
        ],
        "scenarios": [scenario_document(result) for result in run.results],
    }
