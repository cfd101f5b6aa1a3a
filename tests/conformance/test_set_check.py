"""The one set checker, the one variant generator, the history's fault events, and the
rule that a scenario arms only the failpoints its needs list."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retryproof.conformance.catalogue import entry
from retryproof.conformance.context import CatalogueViolation, Context
from retryproof.conformance.fuzz.model import EQUAL_VARIANTS
from retryproof.conformance.outcome import Call, Fault
from retryproof.conformance.set_check import check_sets
from retryproof.conformance.variants import VARIANT_KINDS, variant
from retryproof.spec.digest import ARRAY_FIELDS, SCALAR_FIELDS, request_digest
from retryproof.spec.protocol import Hello

# Strings without CR: the variants add line endings, which is equal only where none was.
_TEXT = st.text(st.characters(blacklist_characters="\r", blacklist_categories=("Cs",)), max_size=8)
_TASKS = st.fixed_dictionaries(
    {},
    optional={
        **{name: st.none() | _TEXT for name in SCALAR_FIELDS},
        **{name: st.none() | st.lists(_TEXT, max_size=3) for name in ARRAY_FIELDS},
    },
)


def write(kind, submission_id=None, task_id=None, disposition="created"):
    args = {"task": {}} if submission_id is None else {"task": {}, "client_submission_id": submission_id}
    result = {"task_id": task_id, "disposition": disposition} if kind == "ok" else None
    return Call("write_task", args, kind, result=result, code=None if kind == "ok" else "io_error")


def listed(*pairs):
    return [{"task_id": task_id, "client_submission_id": submission_id} for task_id, submission_id in pairs]


def test_a_clean_history_has_no_problem_and_faults_change_nothing():
    history = [write("ok", "a", "T1"), Fault("kill", 1), Fault("start", 2), write("ok", "a", "T1", "reused")]
    found = check_sets(history, [], listed(("T1", "a")))
    assert found.problems() == [] and found.added == ("T1",)


def test_lost_misplaced_and_split():
    history = [write("ok", "a", "T1"), write("ok", "b", "T2"), write("ok", "c", "T3"), write("ok", "c", "T4")]
    found = check_sets(history, [], listed(("T2", "a"), ("T3", "c"), ("T4", "c")))
    assert found.lost == ("T1",)
    assert found.misplaced == ("T2 (answered to b, listed under a)",)
    assert found.split == ("c: T3, T4",)
    assert found.duplicated == ("2 tasks under one submission id c: T3, T4",)
    assert found.problems()[0].startswith("lost: ")


def test_unexpected_tasks_and_the_legacy_count():
    # an indeterminate call may have written; a fail call provably did not
    history = [write("info", "a"), write("fail", "b"), write("ok", None, "T9"), write("info", None)]
    found = check_sets(history, [], listed(("T1", "a"), ("T2", "b"), ("T9", None), ("T8", None), ("T7", None)))
    assert found.unexpected == (
        "3 tasks without an id after 2 legacy calls: T9, T8, T7",
        "T2 (under b, an id no call used)",
    )
    assert check_sets(history[:1], [], listed(("T1", "a"))).problems() == []


def test_vanished_unless_a_tamper_in_the_history_removed_it():
    before = listed(("T1", "a"), ("T2", "b"))
    history = [write("ok", "a", "T1"), write("ok", "b", "T2")]
    assert check_sets(history, before, listed(("T2", "b"))).vanished == ("T1",)
    assert check_sets(history, before, listed(("T2", "b"))).lost == ("T1",)
    removal = Call("tamper", {"action": "remove_task", "task_id": "T1"}, "ok", result={})
    assert check_sets([*history, removal], before, listed(("T2", "b"))).problems() == []


def test_a_non_string_id_in_the_history_is_no_id():
    history = [write("fail", ["a"]), write("fail", 123)]
    assert check_sets(history, [], []).problems() == []


def test_faults_are_reported_like_calls():
    assert Fault("start", 2, {"write_task.after_commit": "crash"}).summary() == {
        "op": "start",
        "kind": "fault",
        "process": 2,
        "message": "armed write_task.after_commit=crash",
    }


# No per-example deadline: a property, not a timing; Hypothesis's default 200 ms failed
# it at load 90 (its CI profile has none either).
@settings(deadline=None)
@given(_TASKS)
def test_every_variant_is_the_same_request(task):
    for kind in VARIANT_KINDS:
        assert request_digest(variant(task, kind)) == request_digest(task), kind


def test_the_variants_change_bytes_and_fuzz_uses_them_all():
    task = {"subject": "Caf\u00e9", "body": "a\nb", "references": ["\u00c5-1", "x\ny"], "depends_on": []}
    texts = {kind: repr(variant(task, kind)) for kind in VARIANT_KINDS}
    assert len(set(texts.values())) == len(VARIANT_KINDS), "each kind changes the bytes in its own way"
    assert variant(task, "lone_cr")["references"] == ["\u00c5-1", "x\ry"]
    assert variant(task, "explicit_nulls")["depends_on"] is None and variant(task, "explicit_nulls")["parent"] is None
    assert EQUAL_VARIANTS == VARIANT_KINDS


class _NoConnection:
    def __call__(self):
        raise AssertionError("no process may start for a failpoint the needs do not list")


def test_a_scenario_cannot_arm_a_failpoint_its_needs_do_not_list():
    ctx = Context(entry("WT-CREATE"), _NoConnection(), Hello.read({}), seed=1, concurrency=8)
    with pytest.raises(CatalogueViolation, match="WT-CREATE arms write_task.after_commit"):
        ctx.start(failpoints={"write_task.after_commit": "crash"})
    ctx = Context(entry("CRASH-AFTER-COMMIT"), _NoConnection(), Hello.read({}), seed=1, concurrency=8)
    with pytest.raises(CatalogueViolation, match="approval.after_effect"):
        ctx.start(failpoints={"write_task.after_commit": "crash", "approval.after_effect": "crash"})
