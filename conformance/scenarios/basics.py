"""One submission, judged on its own: creation, digests, normalization, input checks."""

from __future__ import annotations

import json

from retryproof.conformance.outcome import Call
from retryproof.conformance.scenarios import Context, Unjudgeable, scenario
from retryproof.conformance.scenarios.common import (
    expect_created,
    expect_identity,
    expect_reuse_of,
)
from retryproof.conformance.variants import DESCRIPTIONS, VARIANT_KINDS, variant
from retryproof.spec import load_vectors
from retryproof.spec.digest import ContractError, canonical_task, request_digest


@scenario("WT-CREATE", shares_server=True)
def create(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    result = expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    listed = expect_identity(ctx, result, after, submission_id, "first call")
    ctx.check(
        listed.get("request_digest") == result["request_digest"],
        "list_tasks holds another request_digest than the result",
    )
    stored = ctx.expect_ok(ctx.call("read_task", {"task_id": result["task_id"]}), "read_task")
    ctx.check(stored.get("task_id") == result["task_id"], "read_task answered another task_id")
    try:
        same = canonical_task(stored.get("task")) == canonical_task(task)
    except ContractError as exc:
        same = False
        ctx.note("stored_task_problem", str(exc))
    ctx.check(same, "read_task holds a task that is not the submitted one (canonically compared)")
    ctx.check(
        stored.get("request_digest") == result["request_digest"],
        "read_task holds another request_digest than the result",
    )


@scenario("WT-DIGEST-VECTORS", long=4, shares_server=True)
def digest_vectors(ctx: Context) -> None:
    cases = load_vectors()["cases"]
    ctx.start()
    before = ctx.tasks("before")
    disagreeing: list[dict[str, str]] = []
    valid = 0
    for case in cases:
        submission_id = ctx.submission_id()
        args = ctx.write_task_args(submission_id, case.get("task"))
        args_json = None
        if "task_json" in case:
            # Duplicate keys and escapes must reach the runtime verbatim; only the line
            # breaks go (they are insignificant whitespace in valid JSON, and a request is one line).
            text = case["task_json"].replace("\r", " ").replace("\n", " ")
            args_json = f'{{"client_submission_id":{json.dumps(submission_id)},"task":{text}}}'
        call = ctx.call("write_task", args, args_json=args_json)
        if not call.answered:
            raise Unjudgeable(f"vector {case['id']}: no answer ({call.message})")
        if "error" in case:
            expected, got = f"error {case['error']['code']}", _vector_answer(call)
        else:
            valid += 1
            expected, got = f"created {case['digest']}", _vector_answer(call)
        if got != expected:
            disagreeing.append({"vector": case["id"], "expected": expected, "got": got})
    # Every disagreeing vector, whole: a vendor fixes its digest from this list.
    ctx.note("vectors", {"cases": len(cases), "valid": valid, "disagreeing": disagreeing})
    ctx.check(
        not disagreeing,
        f"{len(disagreeing)} of {len(cases)} vectors disagree (each with expected and got in the evidence): "
        + ", ".join(item["vector"] for item in disagreeing),
    )
    ctx.check_tasks(before, ctx.tasks("after"), new=valid)


def _answer(call: Call) -> str:
    """What a call the runtime should have refused answered instead."""
    if call.result is not None:
        return f"{call.disposition} {call.task_id}"
    return f"error {call.code}: {(call.message or '')[:120]}"


def _vector_answer(call: Call) -> str:
    """What a vector's call answered, in the form its expectation is written:
    ``<disposition> <request_digest>`` or ``error <code>``."""
    if call.code is not None:
        return f"error {call.code}"
    return f"{call.disposition} {(call.result or {}).get('request_digest')}"


@scenario("NORMALIZED-EQUAL", shares_server=True)
def normalized_equal(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id = ctx.submission_id()
    task = ctx.task(subject="Café résumé", references=["Ångström-1"], priority=None)
    task.pop("priority", None)
    result = expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    after = before
    unvaried = []
    for kind in (kind for kind in VARIANT_KINDS if kind != "same"):
        name, same = DESCRIPTIONS[kind], variant(task, kind, ctx.task_model)
        if list(same.items()) == list(task.items()):
            unvaried.append(name)  # the tool's fields leave nothing of this kind to vary
            continue
        # The kit's own digest must agree the variant is the same request.
        assert request_digest(same) == result["request_digest"], name
        reuse = ctx.write_task(submission_id, same)
        after = ctx.tasks(name)
        expect_reuse_of(ctx, reuse, after, submission_id, name)
    if unvaried:
        ctx.note("not_varied", {"kinds": unvaried, "task_model": list(ctx.task_model)})
    ctx.check_tasks(before, after, new=1)


@scenario("INVOCATION-FIELDS-IGNORED", shares_server=True)
def invocation_fields(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    first = {"trace_id": f"trace-{ctx.rng.randrange(10**9)}", "retry_count": 0, "call_time": "2026-08-30T10:00:00Z"}
    expect_created(ctx, ctx.write_task(submission_id, task, first), submission_id, task, "first call")
    retry = {
        "trace_id": f"trace-{ctx.rng.randrange(10**9)}",
        "retry_count": 3,
        "call_time": "2026-08-30T10:05:00Z",
        "connection_id": "conn-2",
    }
    reuse = ctx.write_task(submission_id, task, retry)
    after = ctx.tasks("after")
    expect_reuse_of(ctx, reuse, after, submission_id, "retry with new invocation data")
    ctx.check_tasks(before, after, new=1)


@scenario("DISTINCT-IDS-DISTINCT-TASKS", shares_server=True)
def distinct_ids(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    task = ctx.task()
    results = []
    for submission_id in (ctx.submission_id(), ctx.submission_id(), *look_alike_ids(ctx.submission_id())):
        results.append(
            expect_created(
                ctx, ctx.write_task(submission_id, task), submission_id, task, f"call with id {submission_id}"
            )
        )
    task_ids = [result["task_id"] for result in results]
    ctx.check(
        len(set(task_ids)) == len(task_ids),
        f"{len(task_ids)} distinct ids with identical content answered only {len(set(task_ids))} task ids (fuzzy deduplication or folded ids)",
    )
    task_paths = [result["task_path"] for result in results]
    ctx.check(len(set(task_paths)) == len(task_paths), "distinct ids with identical content share a task_path")
    ctx.check_tasks(before, ctx.tasks("after"), new=len(results))


def look_alike_ids(base: str) -> list[str]:
    """Valid ids that are distinct but that a store could fold together: by letter
    case (a case-insensitive file system), by mapping ``:`` and ``.`` to one safe
    character, or by truncating (a 128-character id that differs only at the end)."""
    long = (base + "-" + "x" * 128)[:127]
    return [base + "-Ab", base + "-ab", base + ":s", base + ".s", base + "_s", long + "1", long + "2"]


# Every invalid id of the spec's vectors, non-strings included (DIGEST-R16).
BAD_SUBMISSION_IDS = tuple(
    case["client_submission_id"] for case in load_vectors("submission-id")["cases"] if "error" in case
)
# Lines that are not requests (PROTOCOL-R6); the last two carry an id the answer may name.
# A vertical tab or a form feed is not JSON whitespace (PROTOCOL-R7), though a trim of the
# language's whitespace removes it: a runtime that trims answers the request after one
# (and is caught there, with an answer), and ignores a line of only one.
BAD_LINES = (
    b"this is not json",
    b'{"op": "write_task"}',
    b"[1, 2, 3]",
    b'\x0b{"id": 0, "op": "list_tasks", "args": {}}',
    b'\x0c{"id": 0, "op": "list_tasks", "args": {}}',
    b"\x0b",
    b"\x0c",
    b'{"id": 0, "op": "list_tasks"}',
    b'{"id": 0, "op": "list_tasks", "args": {}, "trace_id": "t-1"}',
)
WHITESPACE_LINE = b" \t \r\n"
#: The malformed ids an HTTP header, a tool argument and a _meta member can all carry:
#: strings of printable Latin-1 characters (a header value holds nothing else).
BAD_TEXT_KEYS = tuple(
    bad
    for bad in BAD_SUBMISSION_IDS
    if isinstance(bad, str) and all(" " <= char <= "~" or "\xa0" <= char <= "\xff" for char in bad)
)
BAD_TASKS = {
    "unknown field": {"title": "x"},
    "invocation field inside the task": {"subject": "x", "trace_id": "t-1"},
    "number for a string": {"subject": 5},
    "string for an array": {"references": "REF-1"},
    "number in an array": {"depends_on": ["T-1", 2]},
    "lone surrogate": {"subject": "x\ud800"},
    "not an object": "Fix login",
}


def _shown(value: object) -> str:
    """``value`` as JSON for a reader: a non-ASCII letter as it is, but a character no one
    can see or tell from another (a no-break space, a format character) escaped, so the
    key "a\u00a0" is not shown as "a " (an ASCII space, which is another key)."""
    return "".join(
        char if char.isprintable() else json.dumps(char)[1:-1] for char in json.dumps(value, ensure_ascii=False)
    )


# Not shares_server, though it would save a start (about 0.04 CPU-s of a run's 6): its
# calls are not keyed ones (bad lines, an unknown op), and it is the scenario that sends
# what may break a server. A harness it leaves alive but broken must fail it, on its
# own process, not a later user of a shared one.
@scenario("INVALID-INPUT")
def invalid_input(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    task = ctx.task()
    for bad_id in BAD_SUBMISSION_IDS:
        call = ctx.call("write_task", {"client_submission_id": bad_id, "task": task})
        ctx.expect_error(call, "invalid_submission_id", f"client_submission_id {_shown(bad_id)}")
    submission_id = ctx.submission_id()
    for name, bad_task in BAD_TASKS.items():
        ctx.expect_error(ctx.write_task(submission_id, bad_task), "invalid_request", f"task with {name}")
    for raw in BAD_LINES:
        reply = ctx.send_line(raw)
        ctx.expect_error(reply, "bad_message", f"line {json.dumps(raw.decode())}")
    # PROTOCOL-R7: a whitespace-only line gets no answer, so the first answer to these
    # two lines is the request's (an answer under no call's id reaches the raw line).
    pair = ctx.send_line(WHITESPACE_LINE + b'{"id": 0, "op": "list_tasks", "args": {}}')
    if not pair.answered:
        raise Unjudgeable(f"a whitespace-only line, then a list_tasks request: no answer ({pair.message})")
    ctx.check(
        pair.kind == "ok",
        f"a whitespace-only line must be ignored, but it was answered: error {pair.code}: {(pair.message or '')[:200]}",
    )
    ctx.expect_error(ctx.call("no_such_op"), "unknown_op", "an unknown op")
    ctx.check_tasks(before, ctx.tasks("after the bad input"), new=0)
    # Nothing was written: the id the bad tasks used is still free, and the harness still serves.
    expect_created(
        ctx, ctx.write_task(submission_id, task), submission_id, task, "a valid call with the id the bad tasks used"
    )
    ctx.check_tasks(before, ctx.tasks("after"), new=1)


@scenario("INVALID-KEY", shares_server=True)
def invalid_key(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    task = ctx.task()
    accepted = []
    for bad_id in BAD_TEXT_KEYS:
        shown = _shown(bad_id)
        # Read leniently: a malformed key that was accepted is judged below, in words
        # about what the runtime did, not as a result the schema refuses.
        call = ctx.call("write_task", {"client_submission_id": bad_id, "task": task}, schema_checked=False)
        if not call.answered:
            raise Unjudgeable(f"key {shown}: no answer ({call.message})")
        if call.code != "invalid_submission_id":
            accepted.append(f"key {shown} answered {_answer(call)}")
    after = ctx.tasks("after the bad keys", schema_checked=False)
    written = [item for item in after.tasks if item.get("task_id") not in before.ids]
    if accepted or written:
        effects = ", ".join(
            f"{item.get('task_id')} under key {_shown(item.get('client_submission_id'))}" for item in written
        )
        ctx.note("accepted_keys", accepted)
        ctx.check(
            False,
            f"{len(accepted)} of {len(BAD_TEXT_KEYS)} malformed keys were not refused as invalid keys: "
            + "; ".join(accepted)
            + f"; the listing holds {len(written)} new effect(s)"
            + (f": {effects}" if effects else ""),
        )
    ctx.check_tasks(before, after, new=0)
    submission_id = ctx.submission_id()
    expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "a valid key after the bad ones")
    ctx.check_tasks(before, ctx.tasks("after"), new=1)
