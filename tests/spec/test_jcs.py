"""RFC 8785 serialization and strict JSON reading, against an independent implementation."""

from __future__ import annotations

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from retryproof.spec.jcs import (
    MAX_SAFE_INTEGER,
    CanonicalizationError,
    DuplicateKeyError,
    canonical_bytes,
    loads_strict,
)

strings = st.text(st.characters(exclude_categories=("Cs",)))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | strings,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(strings, children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_bytes_equal_the_rfc8785_package(value):
    assert canonical_bytes(value) == rfc8785.dumps(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_print_as_ecmascript_does(number):
    assert canonical_bytes(number) == rfc8785.dumps(number)


@pytest.mark.parametrize("number", [MAX_SAFE_INTEGER + 1, -(MAX_SAFE_INTEGER + 2), 10**30])
def test_integers_outside_i_json_are_refused_not_rounded(number):
    with pytest.raises(CanonicalizationError, match="I-JSON"):
        canonical_bytes(number)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "\ud800", {1: "a"}, {"a"}])
def test_values_without_a_canonical_form_are_refused(value):
    with pytest.raises(CanonicalizationError):
        canonical_bytes(value)


def test_keys_sort_by_utf16_code_units_not_code_points():
    # U+FFFF sorts after U+1F600 in UTF-16 (0xFFFF > 0xD83D) though before it by code point.
    assert canonical_bytes({"\uffff": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\uffff":1}'.encode()


@pytest.mark.parametrize(
    "text, field",
    [
        ('{"a": 1, "a": 1}', "task.a"),
        ('{"x": [1, {"k": 1, "k": 2}]}', "task.x[1].k"),
        ('[{"a": {"b": 1, "b": 1}}]', "task[0].a.b"),
    ],
)
def test_duplicate_keys_are_refused_with_their_path(text, field):
    with pytest.raises(DuplicateKeyError) as caught:
        loads_strict(text)
    assert caught.value.field("task") == field


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]"])
def test_non_json_constants_are_refused(text):
    with pytest.raises(ValueError):
        loads_strict(text)


def test_a_clean_document_parses_as_json_does():
    assert loads_strict('{"a": [1, {"b": null}], "c": "\\ud83d\\ude00"}') == {"a": [1, {"b": None}], "c": "\U0001f600"}
