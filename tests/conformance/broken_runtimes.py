"""Reference runtimes with one judging-relevant defect each, for the kit's own tests:
``python -S broken_runtimes.py DEFECT``.

Unlike ``reference_impl/faulty`` (defects the kit has always caught), each of these once
slipped through a hole in the kit's judgement; the tests that use them keep the hole
closed. Several also withhold ``diagnose``, because the hole was that a check ran only
when the runtime offered it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

TYPE_CHECKING = False  # not typing's: as for the reference, importing typing would cost every start
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

# As reference_impl/launch.py does for the reference: the ``retryproof`` package is this
# source tree, made here, so the script needs nothing from site-packages and starts
# with ``-S`` (without ``site`` and the editable install's import hook, a start costs
# about as much as the reference's, not half as much again; 171 starts a suite).
_package = type(sys)("retryproof")
_package.__path__ = [os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))]
sys.modules["retryproof"] = _package

from retryproof.reference_impl import durable  # noqa: E402
from retryproof.reference_impl.harness import OpGroup, build_handlers, op_groups  # noqa: E402
from retryproof.reference_impl.runtime import Runtime, _conflict, _load  # noqa: E402
from retryproof.spec.digest import ContractError  # noqa: E402
from retryproof.spec.protocol import parse_failpoints, serve  # noqa: E402


class RetriesRenumber(Runtime):
    """Resumes another process's reservation under a fresh task number (REC-1): the
    preallocated identity is dropped, and a task the first attempt already wrote is
    re-filed under the new number, so list_tasks never shows two tasks for the id."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._reserved_here: set[str] = set()

    def _reserve(self, submission_id: str, digest: str, task: Any) -> dict[str, Any]:
        self._reserved_here.add(submission_id)
        return super()._reserve(submission_id, digest, task)

    def _recover_reserved(self, submission_id: str, task: Any, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        if submission_id not in self._reserved_here:
            old_path = self._state_path(receipt["task_path"])
            task_id = f"TASK-{self._allocate_number():06d}"
            receipt = self._advance(receipt, "reserved", task_id=task_id, task_path=f"tasks/{task_id}.json")
            written = _load(old_path)
            if written is not None:
                refiled = self._task_record(task_id, submission_id, written["task"], written["request_digest"])
                durable.create_new(self._state_path(receipt["task_path"]), durable.dump(refiled), self._fsync_directory)
                os.unlink(old_path)
        return super()._recover_reserved(submission_id, task, digest, receipt)


class RemovesForeignObject(Runtime):
    """Answers task_path_occupied as it should, but first deletes the foreign object it
    found at the reserved path (REC-4: nothing is overwritten or removed)."""

    def _recover_reserved(self, submission_id: str, task: Any, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        if receipt.get("quarantined"):
            return _conflict("task_path_occupied", digest, receipt)
        path = self._state_path(receipt["task_path"])
        record = _load(path)
        if record is not None and not self._task_matches(record, receipt):
            os.unlink(path)
            self._advance(receipt, "reserved", quarantined=True)
            return _conflict("task_path_occupied", digest, receipt)
        return super()._recover_reserved(submission_id, task, digest, receipt)


class SometimesUnlocked(Runtime):
    """Takes the per-id lock, except on the rare call where its lock helper gives up
    early (here: one call in eight, at random) and goes on unlocked, overwriting a
    reservation it raced with. A single race of eight callers often misses it."""

    def _acquire(self, submission_id: str) -> Iterator[None]:
        if os.urandom(1)[0] < 32:
            return contextlib.nullcontext()
        return super()._acquire(submission_id)

    def _reserve(self, submission_id: str, digest: str, task: Any) -> dict[str, Any]:
        # Imported here, as hashlib below: what only one defect needs, its starts alone pay for.
        from retryproof.reference_impl.faulty.unlocked_check_then_create import CHECK_TO_RESERVE_S

        time.sleep(CHECK_TO_RESERVE_S)  # a store's round trip between check and reservation
        return super()._reserve(submission_id, digest, task)


class UnlockedAfterFirstId(SometimesUnlocked):
    """Locks the first id it ever reads and no later one (a lock table warmed once):
    one race per scenario passes it every time, a second race with a fresh id fails it.
    The first id is taken as the requests are read, in the order the kit sent them: the
    first to reach the lock was, on a loaded machine, now and then a later id's thread,
    and the race the kit sent first then failed instead."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._first_id: str | None = None

    def reading(self, lines: Iterator[bytes]) -> Iterator[bytes]:
        for line in lines:
            if self._first_id is None and b'"write_task"' in line:
                with contextlib.suppress(ValueError, AttributeError):
                    self._first_id = json.loads(line)["args"].get("client_submission_id")
            yield line

    def _acquire(self, submission_id: str) -> Iterator[None]:
        return Runtime._acquire(self, submission_id) if submission_id == self._first_id else contextlib.nullcontext()


class NarrowlyUnlocked(Runtime):
    """Takes no lock between its receipt check and its reservation, and adds no delay:
    the window is only the reference's own code between the two (microseconds, like a
    library's lookup-then-SET on one store), so a race hits it now and then, not always."""

    def _acquire(self, submission_id: str) -> Iterator[None]:
        return contextlib.nullcontext()


class ReportIdAnswersAnything(Runtime):
    """Answers a repeated report id with its first report whatever task or content
    the repeat names (RPT-1: that is invalid_request, nothing written)."""

    def _is_duplicate_report(self, existing: Mapping[str, Any], task_id: str, content: str) -> bool:
        return True


def reuse_without_idempotent(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """A reuse answer that drops ``idempotent`` (its schema requires it)."""
    if result.get("disposition") == "reused":
        return {key: value for key, value in result.items() if key != "idempotent"}
    return result


def reuse_of_someone_else(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """A reuse answer with the right task but another submission's id and digest
    (a result cache keyed by task, not by submission)."""
    if result.get("disposition") == "reused":
        return {**result, "client_submission_id": "someone-else", "request_digest": "sha256:" + "0" * 64}
    return result


class CaseFoldedIds(Runtime):
    """Keeps receipts and their locks under the lower-cased id, as a case-insensitive
    store would: ``Order-1`` and ``order-1`` become one submission (SUB-4)."""

    def _receipt_key(self, submission_id: str) -> str:
        return submission_id.lower()


class TruncatedIds(Runtime):
    """Keys receipts by the first 64 characters of the id, like a short database
    column, although ids may have 128 (SUB-4)."""

    def _receipt_key(self, submission_id: str) -> str:
        return submission_id[:64]


class DiagnoseRefreshes(Runtime):
    """Diagnostics that touch the receipt after reading it (a "heartbeat on read"),
    so age_s restarts at every look and a polled reservation never stalls (DIAG-1)."""

    def diagnose(self, client_submission_id: Any, stale_after_s: Any) -> dict[str, Any]:
        facts = super().diagnose(client_submission_id, stale_after_s)
        receipt = self._read_receipt(client_submission_id)
        if receipt is not None and receipt["state"] != "committed":
            self._write_receipt({**receipt, "updated_at": time.time()})
        return facts


class DiagnoseRefreshesSlowly(DiagnoseRefreshes):
    """A refreshing runtime on a loaded machine: from the second timed reading on (the
    one that asks for a stall past a fraction of a second) each reading waits 80 ms
    before it reads the clock, so the age it refreshed grows between two readings
    0.1 s apart by more than half of that, as a true age does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slow = False

    def diagnose(self, client_submission_id: Any, stale_after_s: Any) -> dict[str, Any]:
        self._slow = self._slow or 0 < stale_after_s < 1
        if self._slow:
            time.sleep(0.08)
        return super().diagnose(client_submission_id, stale_after_s)


class ReportDedupByContent(Runtime):
    """Answers any earlier report with the same task and content, whatever its id, as
    a duplicate: two intents merged by content (RPT-1 is by id, like SUB-4)."""

    def write_report(self, client_submission_id: Any, task_id: Any, content: Any) -> dict[str, Any]:
        for _, record in self._records("reports"):
            if (record["task_id"], record["content"]) == (task_id, content):
                return {"report_id": record["report_id"], "deduplicated": True}
        return super().write_report(client_submission_id, task_id, content)


class DigestOfRawJson(Runtime):
    """Validates the task as the contract says, then digests its JSON as sent (sorted
    keys, no null filling, no line-ending or NFC normalization): most golden vectors
    disagree, and a vendor needs every one of them to find the step it skipped (DIG-1)."""

    def _digest(self, task: Any) -> str:
        import hashlib

        super()._digest(task)
        text = json.dumps(task, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class CrashHangs(Runtime):
    """Declares the write_task failpoints, but an armed crash hangs the call instead
    of killing the process (a crash helper that blocks on a lock it holds)."""

    def _failpoint(self, name: str) -> None:
        if self.armed_failpoints.get(name) == "crash":
            time.sleep(3600)
        super()._failpoint(name)


class CrashPrintsGarbage(Runtime):
    """An armed crash writes a stray line on stdout and carries on instead of dying
    (a debug print left where the SIGKILL should be)."""

    def _failpoint(self, name: str) -> None:
        if self.armed_failpoints.get(name) == "crash":
            print("crashing now (not really)", flush=True)
            return
        super()._failpoint(name)


def listing_without_digests(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """A list_tasks answer whose entries leave out request_digest (its schema requires it)."""
    return {"tasks": [{k: v for k, v in task.items() if k != "request_digest"} for task in result["tasks"]]}


class NoReceiptSchemaRewrite(Runtime):
    """Removes tasks and occupies task paths, but cannot rewrite a receipt's digest
    schema version (its receipts are append-only), and says so in hello's tamper_actions."""

    tamper_actions = ("remove_task", "occupy_task_path")

    def tamper(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if args["action"] not in self.tamper_actions:
            raise ContractError("invalid_request", "args.action", "this runtime cannot perform it")
        return super().tamper(args)


class RawRequestCompare(Runtime):
    """Binds an id to its first request's JSON text as sent, keys in the order given,
    besides its digest: the same request in another key order answers conflict
    digest_mismatch although both digests are equal (DIG-2)."""

    def _settle(self, submission_id: str, task: Any, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        directory = os.path.join(self.state_dir, "raw-requests")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, submission_id)
        raw = json.dumps(task, ensure_ascii=False)
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(raw)
        with open(path, encoding="utf-8") as handle:
            if receipt["request_digest"] == digest and handle.read() != raw:
                return _conflict("digest_mismatch", digest, receipt)
        return super()._settle(submission_id, task, digest, receipt)


def escaping_task_path(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """A task_path that climbs out of the state directory (``..`` segments)."""
    return {**result, "task_path": "../../../../etc/passwd"}


def trimmed_id(args: Mapping[str, Any]) -> Mapping[str, Any]:
    """A "tolerant" key reader: the id trimmed with the language's own strip (Unicode
    whitespace) before anything checks it. Over a header only a trailing no-break space
    reaches such a reader (HTTP drops spaces and tabs at a value's ends; a line feed cannot
    travel), so INVALID-KEY catches it by the submission-id vector that holds one alone."""
    submission_id = args.get("client_submission_id")
    return {**args, "client_submission_id": submission_id.strip()} if isinstance(submission_id, str) else args


def never_answered(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """A write_task that does its work and then never answers (a deadlock after the
    effect): the harness goes silent on the one op most scenarios need."""
    time.sleep(3600)
    return result


# defect -> (runtime class, ops withheld from hello and the handler table, op -> rewrite of its results)
DEFECTS = {
    "reuse-without-idempotent": (Runtime, (), {"write_task": reuse_without_idempotent}),
    "reuse-of-someone-else": (Runtime, (), {"write_task": reuse_of_someone_else}),
    "report-id-answers-anything": (ReportIdAnswersAnything, (), None),
    "renumber-without-diagnose": (RetriesRenumber, ("diagnose",), None),
    "renumber": (RetriesRenumber, (), None),
    "sometimes-unlocked": (SometimesUnlocked, (), None),
    "unlocked-after-first-id": (UnlockedAfterFirstId, (), None),
    "narrowly-unlocked": (NarrowlyUnlocked, (), None),
    "removes-foreign": (RemovesForeignObject, (), None),
    "removes-foreign-without-diagnose": (RemovesForeignObject, ("diagnose",), None),
    "case-folded-ids": (CaseFoldedIds, (), None),
    "truncated-ids": (TruncatedIds, (), None),
    "diagnose-refreshes": (DiagnoseRefreshes, (), None),
    "diagnose-refreshes-slowly": (DiagnoseRefreshesSlowly, (), None),
    "report-dedup-by-content": (ReportDedupByContent, (), None),
    "digest-of-raw-json": (DigestOfRawJson, (), None),
    "crash-hangs": (CrashHangs, (), None),
    "crash-prints-garbage": (CrashPrintsGarbage, (), None),
    "listing-without-digests": (Runtime, (), {"list_tasks": listing_without_digests}),
    "no-receipt-schema-rewrite": (NoReceiptSchemaRewrite, (), None),
    "raw-request-compare": (RawRequestCompare, (), None),
    "never-answers-write-task": (Runtime, (), {"write_task": never_answered}),
    "escaping-task-path": (Runtime, (), {"write_task": escaping_task_path}),
}
# defect -> op -> rewrite of its args, before the harness reads them
ARGUMENT_DEFECTS = {"trims-id-whitespace": {"write_task": trimmed_id}}


def main() -> None:
    runtime_class, withheld, rewrites = DEFECTS.get(sys.argv[1], (Runtime, (), None))
    arguments = ARGUMENT_DEFECTS.get(sys.argv[1], {})
    runtime = runtime_class(
        os.environ["RETRYPROOF_STATE_DIR"],
        parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS")),
        wait_timeout_s=5.0,
    )
    groups = []
    for group in op_groups(runtime):
        handlers = {op: handler for op, handler in group.handlers.items() if op not in withheld}
        for op, rewrite in (rewrites or {}).items():
            if op in handlers:
                handlers[op] = lambda args, serve=handlers[op], rewrite=rewrite: rewrite(serve(args))
        for op, rewrite in arguments.items():
            if op in handlers:
                handlers[op] = lambda args, serve=handlers[op], rewrite=rewrite: serve(rewrite(args))
        capabilities = tuple(name for name in group.capabilities if name not in withheld)
        actions = getattr(runtime_class, "tamper_actions", group.tamper_actions) if "tamper" in handlers else ()
        groups.append(OpGroup(handlers, capabilities, group.failpoints, actions))
    # A runtime that must see the requests in the order they were sent reads them here,
    # before they are handed to threads.
    reading = getattr(runtime, "reading", iter)
    serve(build_handlers(groups, f"broken-{sys.argv[1]}"), stdin=reading(sys.stdin.buffer))


main()
