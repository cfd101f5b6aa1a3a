"""What the binding tests share: the CLI in this process, a run's report, and bindings
written to a temporary directory from the shipped ones."""

from __future__ import annotations

import json
import os
import subprocess
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from kit import retryproof_here

from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: How a binding here starts a test service written in standard-library Python alone
#: (the HTTP services, ``claim_stdio.py``, ``list_effects.py``): without ``site``, as
#: ``kit.STDLIB_PYTHON`` starts a harness; the suite starts them a few hundred times.
STDLIB = ("{python}", "-S")


def needs_mcp_sdk() -> None:
    """Skip unless the official MCP SDK the test servers are built with (major version
    2, the ``mcp`` extra) is installed. Its metadata is read, the SDK is not imported:
    the kit never imports it, and an import here cost each pytest-xdist worker that ran
    one such test 0.5-0.6 CPU-s, and each of its later full garbage collections 50 ms
    instead of 3 (65,000 more objects to walk)."""
    try:
        version = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        version = None
    if version is None or version.split(".")[0] != "2":
        pytest.skip(f"the MCP servers under test need the mcp SDK 2 (found {version}): pip install 'retryproof[mcp]'")


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``retryproof ARGS``, ``env`` added to its environment, in this process
    (``kit.retryproof_here``: the same exit code, output and reports; an uncaught
    exception fails the test as a traceback would). What only a process shows (a
    signal, a memory limit) a test runs with ``subprocess`` itself."""
    return retryproof_here(*args, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def shipped(name: str) -> dict[str, Any]:
    text = resources.files("retryproof.adapters").joinpath("bindings", f"{name}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def write_binding(tmp_path: Path, document: dict[str, Any], name: str = "binding.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def run_binding(
    tmp_path: Path, binding: Path | str, only: str | None, *extra: str, seed: int = 7, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, dict]:
    """``retryproof run --binding`` over the scenarios ``only`` (None: the whole
    catalogue), ``env`` added to its environment; the run and its report.json. In this
    process (``run_cli``: a process of its own cost each run 0.25-0.3 CPU-s of start-up
    and imports), FUZZ-MODEL at the dev budget named here, not at the session's (which
    its Hypothesis settings would inherit). It writes report.json alone: the default
    formats' Markdown and JUnit cost a run about 0.1 CPU-s more (rendering its evidence),
    read by no test here; a ``--format`` in ``extra`` comes later and wins."""
    out = tmp_path / "out"
    # A generous start timeout: the SDK's import alone takes seconds on a busy machine.
    done = run_cli(
        "run",
        "--binding",
        str(binding),
        *(("--only", only) if only else ()),
        "--seed",
        str(seed),
        "--out",
        str(out),
        "--start-timeout",
        "60",
        "--format",
        "json",
        *extra,
        env={ENV_VAR: DEV, **(env or {})},
    )
    assert (out / "report.json").exists(), done.stdout + done.stderr
    return done, json.loads((out / "report.json").read_text(encoding="utf-8"))


def statuses(report: dict) -> dict[str, str]:
    return {scenario["id"]: scenario["status"] for scenario in report["scenarios"]}


def assert_killed_then_retried(scenario: dict) -> None:
    """A2-CRASH-BEFORE-RESPONSE as it ran: the answer withheld, the server SIGKILLed,
    the retry on the server started again."""
    calls = scenario["calls"]
    steps = [(call["op"], call["process"]) for call in calls if call["op"] != "list_tasks"]
    assert steps == [("write_task", 1), ("kill", 1), ("start", 2), ("write_task", 2)], calls
    withheld = next(call for call in calls if call["op"] == "write_task")
    assert withheld.get("message", "").startswith("answer withheld, the runtime SIGKILLed"), withheld


def http_binding(script: str, name: str, **extra) -> dict:
    """A binding for one of the test services here (key in Idempotency-Key, effects at GET /tasks)."""
    return {
        "binding": "retryproof-binding/1",
        "name": name,
        "transport": "http",
        "start": {"command": [*STDLIB, str(HERE / script)], "url": "http://127.0.0.1:{port}"},
        "call": {"method": "POST", "path": "/tasks", "key": {"header": "Idempotency-Key"}},
        "answers": {
            "task_id": "body.id",
            "outcomes": [
                {"when": {"status": 201}, "means": "created"},
                {"when": {"status": 200, "header.idempotent-replayed": "true"}, "means": "reused"},
                {"when": {"status": 422}, "means": "conflict"},
                {"when": {"status": 409}, "means": "in_flight"},
            ],
        },
        "listing": {"get": "/tasks", "items": "body", "task_id": "id", "key": "key", "task": "task"},
        **extra,
    }


#: The wires a claim service (claim_http.py, claim_stdio.py, claim_mcp.py) is served over.
WIRES = ("http", "mcp-stdio", "mcp-http")


def claim_binding(wire: str, defect: str = "", waits: bool = True) -> dict[str, Any]:
    """A binding for the claim store over ``wire`` (one of ``WIRES``, or
    ``mcp-http-stdlib``: MCP streamable HTTP served by claim_streamable.py, not the
    SDK), broken by ``defect`` (claim_store.py's RETRYPROOF_DEFECT; empty: the fixed
    store); without ``waits``, its calls make their steps at once
    (RETRYPROOF_CLAIM_WAITS=none: for CRASH-POINTS alone). Its recovery bound is the
    store's lease."""
    env = {"RETRYPROOF_DEFECT": defect, **({} if waits else {"RETRYPROOF_CLAIM_WAITS": "none"})}
    recovery_s = 1.0 if waits else 0.2
    name = f"claim-{wire}-{defect or 'fixed'}"
    if wire == "http":
        document = http_binding("claim_http.py", name, recovery_s=recovery_s)
        document["start"]["env"] = env
        return document
    start: dict[str, Any] = {"command": [*STDLIB, str(HERE / "claim_stdio.py")], "env": env}
    if wire == "mcp-http":
        start = {"command": ["{python}", str(HERE / "claim_mcp.py")], "env": env, "url": "http://127.0.0.1:{port}/mcp"}
    if wire == "mcp-http-stdlib":
        start = {"command": [*STDLIB, str(HERE / "claim_streamable.py")], "env": env}
        start["url"] = "http://127.0.0.1:{port}/mcp"
    return {
        "binding": "retryproof-binding/1",
        "name": name,
        "transport": "mcp",
        "start": start,
        "call": {"tool": "create_task", "key": {"argument": "idempotency_key"}, "task": {"member": "task"}},
        "answers": {
            "task_id": "result.id",
            "outcomes": [
                {"when": {"isError": False, "result.replayed": False}, "means": "created"},
                {"when": {"isError": False, "result.replayed": True}, "means": "reused"},
                {"when": {"result.error": "in flight"}, "means": "in_flight"},
            ],
        },
        "listing": {"tool": "list_effects", "items": "result.effects", "task_id": "id", "key": "key", "task": "task"},
        "recovery_s": recovery_s,
    }
