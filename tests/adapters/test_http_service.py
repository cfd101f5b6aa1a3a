"""The HTTP translation every Idempotency-Key harness shares (http_service.py),
against a stand-in service: what the library answered is what the kit is told."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from retryproof.adapters import loopback
from retryproof.adapters.implementations import http_service
from retryproof.spec.digest import ContractError
from retryproof.spec.protocol import ProtocolError

FAKE = Path(__file__).with_name("fake_http_service.py")


class Stand(http_service.HttpServiceRuntime):
    implementation = {"name": "stand-in", "version": "0", "language": "python"}
    status_codes = {409: "in_progress"}


@pytest.fixture
def runtime(tmp_path):
    environment = {"RETRYPROOF_STATE_DIR": str(tmp_path)}  # the kit sets it for a real harness
    runtime = Stand(str(tmp_path), {}, [sys.executable, "-S", str(FAKE)], str(tmp_path), environment)
    yield runtime
    runtime.close()


def test_the_call_that_wrote_is_created_and_a_replay_is_reused(runtime):
    first = runtime.write_task({"subject": "a"}, "order-1")
    again = runtime.write_task({"subject": "other"}, "order-1")  # the stand-in replays by key alone
    assert (first["disposition"], first["action_taken"]) == ("created", True)
    assert (again["disposition"], again["action_taken"], again["task_id"]) == ("reused", False, first["task_id"])
    assert [t["task_id"] for t in runtime.list_tasks()["tasks"]] == [first["task_id"]]
    legacy = runtime.write_task({"subject": "a"})
    assert (legacy["disposition"], legacy["idempotent"]) == ("created", False)


def test_refusals_are_passed_on_by_the_library_s_name_or_as_io_errors(runtime):
    with pytest.raises(ProtocolError) as refused:
        runtime.write_task({"subject": "a"}, "busy")
    assert refused.value.code == "in_progress"
    with pytest.raises(OSError, match="HTTP 500"):
        runtime.write_task({"subject": "a"}, "boom")
    with pytest.raises(ContractError) as invalid:
        runtime.write_task({"subject": "a"}, "bad id with spaces")
    assert invalid.value.code == "invalid_submission_id"


def test_a_service_that_died_takes_the_harness_with_it(runtime, monkeypatch):
    crashed = []
    monkeypatch.setattr(http_service, "crash_now", lambda: crashed.append(True))
    with pytest.raises(OSError, match="the service failed the request"):
        runtime.write_task({"subject": "a"}, "die")
    assert crashed == [True]


def test_free_port_never_hands_one_port_out_twice_in_a_process():
    """Parallel scenarios (``--jobs``) each start a server on a free port; one port
    handed to two of them would make one scenario judge the other's server."""
    from concurrent.futures import ThreadPoolExecutor

    from retryproof.adapters.loopback import free_port

    with ThreadPoolExecutor(8) as pool:
        ports = list(pool.map(lambda _: free_port(), range(400)))
    assert len(set(ports)) == len(ports)


def test_a_service_port_another_program_took_is_picked_again(tmp_path, monkeypatch):
    """The kit's pick and the service's bind are two moments: a port taken between them
    is picked again, and what the harness talks to is its own service."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    handed = iter([taken.getsockname()[1]])
    real = loopback.free_port
    monkeypatch.setattr(loopback, "free_port", lambda: next(handed, None) or real())
    environment = {"RETRYPROOF_STATE_DIR": str(tmp_path)}
    runtime = Stand(str(tmp_path), {}, [sys.executable, "-S", str(FAKE)], str(tmp_path), environment)
    try:
        assert runtime.port != taken.getsockname()[1]
        assert runtime.write_task({"subject": "a"}, "order-1")["disposition"] == "created"
    finally:
        runtime.close()
        taken.close()
