"""KILL-NEMESIS reads a batch of pipelined retries while their answers keep coming, each
within a call timeout of the one before, and no longer: a batch gone silent used to be
waited for a second call timeout (``collect``'s own whole-batch deadline), and a call
that answered meanwhile was read as answered; its loss said "one deadline for the
whole batch", which is not how the batch was waited for."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from retryproof.adapters.connection import Connection, Lost, Reply
from retryproof.conformance.catalogue import entry
from retryproof.conformance.context import Context
from retryproof.conformance.scenarios import kill_nemesis
from retryproof.spec.protocol import Failure, Hello

CALL_TIMEOUT_S = 1.0
#: When the second call answers: past one call timeout of silence after the first
#: answer, within the second timeout the old code waited.
LATE_S = 1.5


class Scripted(Connection):
    """Answers its first write at once and its second ``LATE_S`` after it was sent."""

    def __init__(self) -> None:
        self.sent = 0
        self.timers: list[threading.Timer] = []

    def start(self, failpoints: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        return {}

    def submit(self, op: str, args: Mapping[str, Any] | None = None, *, args_json: str | None = None) -> Future:
        future: Future = Future()
        answer = Failure(None, "io_error", f"call {self.sent}")
        self.sent += 1
        if self.sent == 1:
            future.set_result(answer)
        else:
            timer = threading.Timer(LATE_S, future.set_result, (answer,))
            self.timers.append(timer)
            timer.start()
        return future

    def wait(self, pending: Future, timeout: float | None = None, *, allowed_s: float | None = None) -> Reply:
        try:
            return pending.result(timeout)
        except FutureTimeout:
            return Lost("no response")

    def send_line(self, raw: bytes, timeout: float | None = None) -> Reply:
        return Lost("no line framing")

    def kill(self) -> None:
        for timer in self.timers:
            timer.cancel()

    def stop(self) -> None:
        self.kill()

    @property
    def alive(self) -> bool:
        return True

    def stderr_text(self) -> str:
        return ""

    def exit_statuses(self) -> list[int | None]:
        return [None]


def test_a_batch_gone_silent_is_given_up_after_one_call_timeout_not_two(monkeypatch):
    connection = Scripted()
    ctx = Context(entry("KILL-NEMESIS"), lambda: connection, Hello.read({}), 1, 8, call_timeout=CALL_TIMEOUT_S)
    ctx.start()
    # Each key's first retry as _settle read it, before any retry one by one.
    monkeypatch.setattr(kill_nemesis, "converge", lambda ctx, key, task, bound, first: first[1])
    try:
        finals = kill_nemesis._settle(ctx, [("k1", {"subject": "a"}), ("k2", {"subject": "b"})], bound=5)
    finally:
        connection.kill()
    assert finals["k1"].code == "io_error"
    late = finals["k2"]
    assert not late.answered, late
    assert late.message == f"no response within {CALL_TIMEOUT_S:g}s of the batch's last answer"
