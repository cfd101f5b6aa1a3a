"""Properties of the write-task-v1 digest on tasks it has never seen.

What must not change the digest (key order, spelling of line endings and composition,
absent versus null) and what must (array order, any real change), checked against the
independent implementation as well as on its own.
"""

from __future__ import annotations

import json

import independent_digest as independent
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from independent_digest import normalized
from strategies import ARRAYS, SCALARS, invalid_tasks, respell, tasks, texts

from retryproof.spec.digest import (
    ContractError,
    canonical_json,
    canonical_task,
    request_digest,
)

#: No per-example deadline: these are properties, not timings, and Hypothesis's default
#: 200 ms failed examples on a loaded machine (its CI profile has none either).
PROPERTY = settings(deadline=None)


@PROPERTY
@given(tasks)
def test_agrees_with_the_independent_implementation(task):
    assert canonical_json(task) == independent.canonical_text(task)
    assert request_digest(task) == independent.digest(task)


@PROPERTY
@given(invalid_tasks)
def test_rejects_what_the_independent_implementation_rejects_naming_the_same_field(case):
    task, field = case
    try:
        canonical_task(task)
    except ContractError as exc:
        assert (exc.code, exc.field) == ("invalid_request", field)
    else:
        raise AssertionError(f"accepted {task!r}")


@PROPERTY
@given(tasks, st.randoms(use_true_random=False))
def test_key_order_does_not_matter(task, random):
    keys = list(task)
    random.shuffle(keys)
    assert request_digest({key: task[key] for key in keys}) == request_digest(task)


@PROPERTY
@given(tasks, st.data())
def test_line_endings_and_composition_do_not_matter(task, data):
    canonical = canonical_task(task)
    respelled = {
        key: [respell(item, data) for item in value]
        if isinstance(value, list)
        else value
        if value is None
        else respell(value, data)
        for key, value in canonical.items()
    }
    assert request_digest(respelled) == request_digest(task)


@PROPERTY
@given(tasks, st.data())
def test_absent_null_and_empty_array_are_one_request(task, data):
    canonical = canonical_task(task)
    variant = {}
    for key, value in canonical.items():
        if value is None or value == []:
            spelling = data.draw(st.sampled_from(["absent", "null", "as is"]), label=key)
            if spelling == "absent":
                continue
            value = None if spelling == "null" else value
        variant[key] = value
    assert request_digest(variant) == request_digest(task)


@PROPERTY
@given(st.sampled_from(ARRAYS), st.lists(texts, min_size=2, max_size=5, unique_by=normalized), st.integers(1, 4))
def test_reordering_distinct_items_changes_the_digest(key, items, shift):
    shift = shift % len(items) or 1  # a rotation of distinct items is another order
    assert request_digest({key: items[shift:] + items[:shift]}) != request_digest({key: items})


@PROPERTY
@given(tasks, st.sampled_from(SCALARS + ARRAYS), texts.filter(bool))
def test_any_real_change_changes_the_digest(task, key, extra):
    """Lengthen one field's canonical value by non-empty text: a different request."""
    canonical = canonical_task(task)
    value = canonical[key]
    changed = {**canonical, key: value + [extra] if key in ARRAYS else (value or "") + extra}
    assume(canonical_task(changed) != canonical)
    assert request_digest(changed) != request_digest(task)


@PROPERTY
@given(tasks)
def test_canonical_output_is_a_fixed_point(task):
    text = canonical_json(task)
    parsed = json.loads(text)
    assert parsed == canonical_task(task)
    assert canonical_json(parsed) == text
    assert request_digest(parsed) == request_digest(task)
