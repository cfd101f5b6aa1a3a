"""Reading one answer through a binding: dotted paths, outcome rules, and the
protocol results the kit judges, built from what the service said and from its
authoritative listing.

An answer is a plain mapping of its parts (its wire's ``Transport.answer_roots``): ``status``,
``header`` (names lowercased), ``body`` for http; ``result``, ``text``, ``isError``,
``error`` for mcp. What no rule maps is ``info`` (an error code outside the spec's
fail codes), never a pass. A binding whose answers do not say "replayed" has its
created answers told apart by the listing (``Ledger``).
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Collection, Mapping
from typing import Any

from retryproof.adapters.binding.binding_file import ALL_FIELDS, Binding, Rule
from retryproof.adapters.binding.transports.base import parse_json
from retryproof.adapters.digests import DigestMemo
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, ContractError
from retryproof.spec.protocol import Failure

#: The code of an answer no rule maps: not a fail code, so the outcome model reads it as info.
UNMAPPED = "unmapped_answer"
#: The protocol error each rejection a binding can name stands for.
REJECTIONS = {"in_flight": "in_flight", "invalid_key": "invalid_submission_id", "invalid_request": "invalid_request"}
_MISSING = object()


def resolve(value: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``value``, or ``_MISSING``. Header names match
    in any case (they are stored lowercased)."""
    parts = path.split(".") if path else []
    for index, part in enumerate(parts):
        if index == 1 and parts[0] == "header":
            part = part.lower()
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def found(value: Any) -> bool:
    return value is not _MISSING


def _equal(got: Any, expected: Any) -> bool:
    if isinstance(got, bool) or isinstance(expected, bool):
        return got is expected
    return got == expected or (isinstance(got, str) and got == str(expected))


def _holds(got: Any, expected: tuple[Any, ...] | re.Pattern[str]) -> bool:
    """Whether one answer value meets one condition: a pattern is searched in a
    string (anything else never matches it), a tuple lists the accepted scalars."""
    if isinstance(expected, re.Pattern):
        return isinstance(got, str) and expected.search(got) is not None
    return any(_equal(got, option) for option in expected)


def meaning(binding: Binding, answer: Mapping[str, Any]) -> Rule | None:
    """The first rule every path of which has one of its values, or None."""
    for rule in binding.rules:
        if all(found(got := resolve(answer, path)) and _holds(got, expected) for path, expected in rule.when.items()):
            return rule
    return None


class Ledger:
    """Reuse judged by the authority, for a service whose answers never say
    "replayed": an answer naming an effect the listing held before the call is
    ``reused``; one naming a new effect is ``created``, once; any later answer naming
    that effect is ``reused`` (of eight racing calls that all name one new effect,
    one made it, whichever it was). Only a call whose own listing lacked the effect can
    be credited with it: a racing call that listed the effect already, and whose answer
    is judged first, does not take the credit from the one that made it. One ledger per
    state directory, shared by every connection on it (A4-MULTIPROCESS's servers),
    lives as long as they do."""

    _by_state: weakref.WeakValueDictionary[str, Ledger] = weakref.WeakValueDictionary()
    _registry_lock = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._credited: set[str] = set()  # effects one answer was already judged to have created

    @classmethod
    def of(cls, state_dir: str) -> Ledger:
        with cls._registry_lock:
            ledger = cls._by_state.get(state_dir)
            if ledger is None:
                ledger = cls._by_state[state_dir] = cls()
            return ledger

    def judge(self, task_id: str, listed_before: Collection[str]) -> str:
        """``created`` or ``reused`` for an answer naming ``task_id``."""
        with self._lock:
            if task_id in listed_before or task_id in self._credited:
                return "reused"
            self._credited.add(task_id)
            return "created"


def describe(answer: Mapping[str, Any], binding: Binding | None = None) -> str:
    """A short account of an answer for evidence: every part but the headers, and of
    the headers those the binding's rules test (so "no outcome rule matches" shows
    the header a rule missed, not a hundred others)."""
    parts = [f"{key} {str(value)[:200]}" for key, value in answer.items() if key != "header" and value is not None]
    tested = sorted(
        {
            path.split(".", 1)[1].lower()
            for rule in (binding.rules if binding else ())
            for path in rule.when
            if path.startswith("header.")
        }
    )
    headers = answer.get("header")
    if not isinstance(headers, Mapping):
        headers = {}
    if tested:
        shown = {name: headers.get(name) for name in tested}
        parts.append(
            "header "
            + ", ".join(f"{name}: {'absent' if value is None else str(value)[:200]}" for name, value in shown.items())
        )
    return "; ".join(parts)


#: Characters of an answer's body kept per exchange in the evidence.
EXCHANGE_BODY_CHARS = 1000


def exchange(binding: Binding, key: str | None, answer: Mapping[str, Any], rule: Rule | None) -> dict[str, Any]:
    """One call as the service answered it, for the evidence: the key sent, every part
    of the answer (status, headers, body; isError, result, text, error), a long value
    cut, and which outcome rule read it (None: no rule, so the call was indeterminate)."""
    shown = {
        part: value if isinstance(value, (bool, int, float)) or value is None else _cut(value)
        for part, value in answer.items()
    }
    matched = None if rule is None else f"outcomes[{binding.rules.index(rule)}]: {rule.means}"
    return {"key": key, "answer": shown, "rule": matched}


def _cut(value: Any) -> Any:
    if isinstance(value, Mapping) and all(isinstance(item, str) for item in value.values()) and len(value) <= 64:
        return {name: item[:200] for name, item in value.items()}  # headers
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= EXCHANGE_BODY_CHARS else text[: EXCHANGE_BODY_CHARS - 1] + "…"


def unmapped(why: str) -> Failure:
    return Failure(None, UNMAPPED, why)


def task_path(task_id: str) -> str:
    """The kit's name for an effect's place: a binding's effects have no path of their
    own, and result and listing must name it alike."""
    return f"effects/{task_id}"


def effect_id(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        return None
    return str(value)


def id_path_result(
    disposition: str, task_id: str, key: str | None, digest: str, conflict: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A creation result as the protocol states it, for what the service answered."""
    result: dict[str, Any] = {
        "disposition": disposition,
        "action_taken": disposition == "created",
        "task_id": task_id,
        "task_path": task_path(task_id),
        "client_submission_id": key,
        "request_digest": digest,
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
        "idempotent": key is not None,
    }
    if conflict is not None:
        result["conflict"] = dict(conflict)
    return result


def stored_task(binding: Binding, item: Any) -> dict[str, Any] | None:
    """The write-task fields of a listing item, named back from the call's names."""
    holder = resolve(item, binding.listing["task"])
    if isinstance(holder, str):  # a database column holding the task as JSON text
        holder = parse_json(holder.encode("utf-8"))
    if not isinstance(holder, Mapping):
        return None
    return {field: holder[name] for field, name in binding.task_fields.items() if name in holder}


def listed_tasks(binding: Binding, answer: Mapping[str, Any]) -> list[dict[str, Any]] | Failure:
    """``list_tasks`` entries (plus the stored ``task``) from a listing answer."""
    items = resolve(answer, binding.listing["items"])
    if not isinstance(items, list):
        return unmapped(f"listing: {binding.listing['items']} is not an array in the answer ({describe(answer)})")
    tasks = []
    for index, item in enumerate(items):
        task_id = effect_id(resolve(item, binding.listing["task_id"]))
        key = resolve(item, binding.listing["key"])
        task = stored_task(binding, item)
        if task_id is None or task is None:
            return unmapped(
                f"listing item {index} has no {'task_id' if task_id is None else 'task'}: {str(item)[:200]}"
            )
        try:
            digest = listed_digest(task)
        except ContractError as exc:
            return unmapped(f"listing item {index} holds a task write-task-v1 refuses: {exc}")
        tasks.append(
            {
                "task_id": task_id,
                "task_path": task_path(task_id),
                "client_submission_id": key if found(key) and isinstance(key, str) else None,
                "request_digest": digest,
                "task": task,
            }
        )
    return tasks


#: The digest of each task a listing held, kept by the task's JSON text (keys sorted): a
#: listing answers every task again each time (FUZZ-MODEL lists after every step, each
#: listing longer than the last), the tasks come parsed from JSON, and a task
#: write-task-v1 accepts is an object of strings and arrays of strings, so two such
#: tasks with one text are one task.
listed_digest = DigestMemo(lambda task: json.dumps(task, sort_keys=True))


def call_arguments(binding: Binding, task: Any) -> dict[str, Any] | str:
    """The task as the call carries it (tool arguments or JSON body, with the
    binding's constants, before the key), or why it cannot be sent. The kit's own
    tasks hold only the tool's fields (``Binding.task_model``); a field outside them
    with a value is a task this tool cannot be asked for."""
    if binding.task_member and binding.task_fields == ALL_FIELDS:
        carried: Any = task  # the task object as it is, invalid ones included (INVALID-INPUT)
    elif not isinstance(task, Mapping):
        return "the task is not an object, and this binding sends the task's fields"
    else:
        names = binding.task_fields
        unsendable = sorted(str(field) for field, value in task.items() if field not in names and value is not None)
        if unsendable:
            return f"the tool has no field for task field(s) {', '.join(unsendable)} (call.task.fields)"
        carried = {names[field]: value for field, value in task.items() if field in names}
    arguments = {binding.task_member: carried} if binding.task_member else carried
    return {**binding.constants, **arguments}
