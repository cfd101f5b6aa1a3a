"""Hypothesis strategies for task objects, aimed at the rules the digest must honour."""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st
from independent_digest import ARRAYS, SCALARS

# Characters that exercise a rule: line endings, combining marks that reorder and
# compose, Hangul jamo, singletons NFC maps (ohm, angstrom), compatibility characters
# NFC must keep, controls, separators that are not line endings, non-BMP.
INTERESTING = [
    "\r",
    "\n",
    "\r\n",
    "e\u0301",
    "\u0323",
    "\u0302",
    "\u1112",
    "\u1161",
    "\u11ab",
    "\u2126",
    "\u212b",
    "\ufb01",
    "\uff21",
    "\u2028",
    "\u2029",
    "\u0085",
    "\x00",
    "\x1f",
    "\x7f",
    "\b",
    "\f",
    "\t",
    '"',
    "\\",
    "/",
    "\U0001f600",
    "\U00020bb7",
    " ",
]

texts = st.lists(st.one_of(st.sampled_from(INTERESTING), st.characters(exclude_categories=("Cs",))), max_size=8).map(
    "".join
)

tasks = st.fixed_dictionaries(
    {},
    optional={
        **{key: st.none() | texts for key in SCALARS},
        **{key: st.none() | st.lists(texts, max_size=4) for key in ARRAYS},
    },
)


def respell(text: str, data: st.DataObject) -> str:
    """An equivalent spelling of an already-canonical string: each LF as LF, CRLF or
    a lone CR, and the whole in NFC or NFD."""
    if data.draw(st.booleans(), label="nfd"):
        text = unicodedata.normalize("NFD", text)
    out = []
    for index, char in enumerate(text):
        if char != "\n":
            out.append(char)
            continue
        ending = data.draw(st.sampled_from(["\n", "\r\n", "\r"]), label="line ending")
        # A lone CR followed by the next LF would read as one CRLF: one break, not two.
        if ending == "\r" and text[index + 1 : index + 2] == "\n":
            ending = "\r\n"
        out.append(ending)
    return "".join(out)


# One fault each, so that the field an implementation names is unambiguous. No infinities:
# json.dumps writes them as Infinity, which is not JSON at all, so no field is at fault.
def _faults(task: dict) -> st.SearchStrategy[tuple[dict, str]]:
    wrong_scalar = st.one_of(
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.just({}),
        st.lists(texts, max_size=2),
    )
    wrong_array = st.one_of(st.integers(), st.booleans(), texts, st.just({"0": "a"}))
    wrong_item = st.one_of(st.none(), st.integers(), st.booleans(), st.just(["nested"]), st.just({}))

    def with_value(key, value, field):
        return ({**task, key: value}, field)

    def with_item(key, items, index, item):
        index = min(index, len(items))
        return ({**task, key: items[:index] + [item] + items[index:]}, f"task.{key}[{index}]")

    return st.one_of(
        st.builds(
            lambda key: ({**task, key: "x"}, f"task.{key}"),
            st.sampled_from(["title", "trace_id", "retry_count", "Subject", "client_submission_id"]),
        ),
        st.builds(lambda key, value: with_value(key, value, f"task.{key}"), st.sampled_from(SCALARS), wrong_scalar),
        st.builds(lambda key, value: with_value(key, value, f"task.{key}"), st.sampled_from(ARRAYS), wrong_array),
        st.builds(
            lambda key, items, index, item: with_item(key, items, index, item),
            st.sampled_from(ARRAYS),
            st.lists(texts, max_size=3),
            st.integers(0, 3),
            wrong_item,
        ),
        st.builds(lambda key, text: with_value(key, text + "\ud800", f"task.{key}"), st.sampled_from(SCALARS), texts),
    )


invalid_tasks = tasks.flatmap(_faults)
"""``(task, field)``: a valid task with exactly one fault, and the field that names it."""
