"""A binding file, checked and turned into a typed ``Binding``.

Everything that can be wrong with a binding is found here, before any server starts:
the schema (``spec/schemas/binding.json``: unknown keys, wrong types), the transport's
own rules (an mcp call names a tool, an http call a method and path), every answer
path, whose first segment must be a part the transport's answers have, and every text
pattern, which must compile and sit on a path that can hold a string. A problem is a
``BindingError`` naming the key, which the kit reports as a user error.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retryproof.adapters.binding.transports import Transport, wire
from retryproof.spec import validator
from retryproof.spec.digest import TASK_FIELDS
from retryproof.spec.schema_messages import schema_message

#: A binding without ``call.task.fields``: all ten fields, under their own names.
ALL_FIELDS = {name: name for name in TASK_FIELDS}

FORMAT = "retryproof-binding/1"
#: The parts of a listing command's answer (its JSON output); a transport's answers
#: have the parts its ``Transport.answer_roots`` names.
COMMAND_ROOTS = ("body",)
#: What an answer rule may say the call did.
MEANINGS = ("created", "reused", "conflict", "in_flight", "invalid_key", "invalid_request")
#: Paths whose value is never a string, whatever the service does: a text pattern
#: there could match nothing (http's status is a number, mcp's isError a boolean,
#: a JSON-RPC error code an integer; header, result and error are objects).
NEVER_TEXT = {
    "http": ("status", "header"),
    "mcp": ("isError", "error.code", "error", "result"),
}


class BindingError(Exception):
    """A binding the kit cannot use; ``key`` is where in the file (dotted)."""

    def __init__(self, key: str, problem: str, hint: str | None = None):
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem
        self.hint = hint


@dataclass(frozen=True)
class Rule:
    """One outcome rule: each path's value is one of the listed scalars, or a string
    the compiled pattern finds (``re.search``)."""

    when: Mapping[str, tuple[Any, ...] | re.Pattern[str]]
    means: str


@dataclass(frozen=True)
class Binding:
    """One tool path, as its binding file describes it (see the schema for each field)."""

    source: str
    name: str
    version: str
    transport: str  # a key of transports.TRANSPORTS
    wire: type[Transport]  # the transport's wire for this binding (with a url or without)
    command: tuple[str, ...]
    url: str | None
    tool: str | None
    method: str | None
    path: str | None
    key: tuple[str, str]  # (argument | meta | header, name)
    task_member: str | None
    #: The tool's task model: each write-task field it has -> the name it travels
    #: as. The kit sends, expects and compares only these fields.
    task_fields: Mapping[str, str]
    task_id: str
    rules: tuple[Rule, ...]
    listing: Mapping[str, Any]
    offers: tuple[str, ...]
    claims: tuple[str, ...]
    recovery_s: float = 0.0
    #: Arguments (or body members) every call carries unchanged, beside the task.
    constants: Mapping[str, Any] = field(default_factory=dict)
    #: Extra environment of the started server (``{port}`` etc. filled in).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Where relative paths in the commands are read from: the binding file's folder.
    directory: str = "."

    @property
    def task_model(self) -> tuple[str, ...]:
        """The write-task fields the tool has, in the spec's order."""
        return tuple(name for name in TASK_FIELDS if name in self.task_fields)

    @property
    def capabilities(self) -> tuple[str, ...]:
        """What the synthesized ``hello`` declares: write_task and what it offers."""
        return ("write_task", *self.offers)

    @property
    def normalizes(self) -> bool:
        """Whether the service compares requests by the write-task-v1 digest (claimed)."""
        return "write-task-v1" in self.claims

    @property
    def says_reused(self) -> bool:
        """Whether an answer says "replayed" itself; otherwise the kit tells reuse
        from creation by the authoritative listing (``answers.Ledger``)."""
        return any(rule.means == "reused" for rule in self.rules)

    @property
    def protocol_parts(self) -> tuple[str, ...]:
        """The ``protocol:`` needs of the catalogue a binding meets: only a claimed
        write-task-v1 comparison (framing, digests and invocation data stay the harness's)."""
        return tuple(claim for claim in self.claims if claim == "write-task-v1")

    @property
    def target(self) -> str:
        return self.wire.label

    def start_command(self, port: int | None, state_dir: str) -> list[str]:
        return self.fill(self.command, port, state_dir)

    def start_env(self, port: int | None, state_dir: str) -> dict[str, str]:
        """``start.env`` with ``{python}``, ``{port}`` and ``{state_dir}`` filled in."""
        return {name: self.fill([value], port, state_dir)[0] for name, value in self.env.items()}

    @staticmethod
    def fill(words: Sequence[str], port: int | None, state_dir: str) -> list[str]:
        """``words`` with ``{python}`` (the kit's interpreter), ``{port}`` and
        ``{state_dir}`` filled in."""
        return [_fill(word, port).replace("{state_dir}", state_dir) for word in words]

    def base_url(self, port: int | None) -> str | None:
        return None if self.url is None else _fill(self.url, port).rstrip("/")


def _fill(text: str, port: int | None) -> str:
    return text.replace("{python}", sys.executable).replace("{port}", "" if port is None else str(port))


def parse(document: Any, source: str) -> Binding:
    """The ``Binding`` a loaded YAML document describes; ``BindingError`` otherwise."""
    if not isinstance(document, dict):
        raise BindingError("(top level)", "a binding is a mapping", "start from the example in spec/README.md")
    _check_schema(document)
    _check_placeholders(document, "")
    transport = document["transport"]
    start, call, answers, listing = document["start"], document["call"], document["answers"], document["listing"]
    url = start.get("url")
    command = _words(start["command"], "start.command")
    if "command" in listing:
        listing = {**listing, "command": _words(listing["command"], "listing.command")}
    chosen = wire(transport, url)
    if chosen is None:
        needs = "needs the url the service listens on" if url is None else "speaks on stdin and stdout: it has no url"
        raise BindingError("start.url", f"an {transport} binding {needs}")
    call_keys, missing_call_key = chosen.call_needs
    for key in call_keys:
        if key not in call:
            raise BindingError(f"call.{key}", missing_call_key)
    sections = {"call": call, "call.key": call["key"], "listing": listing}
    for where, foreign in chosen.foreign.items():
        _only(sections[where], where, foreign, transport)
    roots = {transport: chosen.answer_roots, "command": COMMAND_ROOTS}
    _check_path(answers["task_id"], "answers.task_id", transport, roots)
    rules = tuple(
        Rule(_conditions(rule["when"], f"answers.outcomes[{index}].when", transport, roots), rule["means"])
        for index, rule in enumerate(answers["outcomes"])
    )
    if "created" not in {rule.means for rule in rules}:
        raise BindingError(
            "answers.outcomes",
            "no rule means created",
            "name the answer of a call that succeeded (for example status 201, or 200 and 201 both when the service does not say whether it replayed)",
        )
    listing_kind = "command" if "command" in listing else transport
    _check_path(listing["items"], "listing.items", listing_kind, roots)
    if "resource" in listing and listing["items"].split(".")[0] != "text":
        raise BindingError(
            "listing.items", "a resource listing is read as the JSON text of the resource: start with text"
        )
    task = call.get("task") or {}
    task_fields = task.get("fields") or ALL_FIELDS
    constants = dict(call.get("constants") or {})
    _check_names(task_fields, constants, call["key"], task.get("member"))
    version = document.get("version", "unversioned")
    return Binding(
        source=source,
        name=document["name"],
        version=version,
        transport=transport,
        wire=chosen,
        command=command,
        url=url,
        tool=call.get("tool"),
        method=call.get("method"),
        path=call.get("path"),
        key=next(iter(call["key"].items())),
        task_member=task.get("member"),
        task_fields=task_fields,
        task_id=answers["task_id"],
        rules=rules,
        listing=dict(listing),
        offers=tuple(document.get("offers", ())),
        claims=tuple(document.get("claims", ())),
        recovery_s=float(document.get("recovery_s", 0)),
        constants=constants,
        env=dict(start.get("env") or {}),
        directory=os.path.dirname(os.path.abspath(source)),
    )


def _conditions(
    when: Mapping[str, Any], where: str, transport: str, roots: Mapping[str, tuple[str, ...]]
) -> dict[str, tuple[Any, ...] | re.Pattern[str]]:
    """A rule's ``when``, each value as the tuple of scalars it accepts or a compiled
    pattern; a pattern that does not compile, or sits on a path that never holds a
    string, is refused here."""
    conditions: dict[str, tuple[Any, ...] | re.Pattern[str]] = {}
    for path, expected in when.items():
        _check_path(path, f"{where}.{path}", transport, roots)
        if not isinstance(expected, dict):
            conditions[path] = tuple(expected) if isinstance(expected, list) else (expected,)
            continue
        if path in NEVER_TEXT.get(transport, ()):
            raise BindingError(
                f"{where}.{path}.pattern",
                f"{path} is never a string in an answer of {transport}, so no pattern can match it",
                "match text where the service puts it: http body or header.NAME; mcp text (the first text content), result.MEMBER or error.message",
            )
        try:
            conditions[path] = re.compile(expected["pattern"])
        except re.error as exc:
            raise BindingError(
                f"{where}.{path}.pattern",
                f"is not a regular expression: {exc}",
                "a pattern is a Python re expression, searched anywhere in the text (anchor it with ^ to match a prefix)",
            ) from None
    return conditions


def _check_names(
    fields: Mapping[str, str], constants: Mapping[str, Any], key: Mapping[str, str], member: str | None
) -> None:
    """Every name a call carries is used once: two task fields, a constant or the key
    argument under one name would overwrite each other in the call."""
    names = list(fields.values()) if member is None else [member]
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise BindingError("call.task.fields", f"two fields travel as {doubled[0]!r}", "give each field its own name")
    taken = set(names) | ({key["argument"]} if "argument" in key else set())
    for name in constants:
        if name in taken:
            raise BindingError(
                f"call.constants.{name}",
                "is also the name of a task field or of the key argument",
                "a constant is an argument the task does not carry",
            )


def _words(command: str | list[str], where: str) -> tuple[str, ...]:
    if isinstance(command, list):
        return tuple(command)
    try:
        return tuple(shlex.split(command))
    except ValueError as exc:
        raise BindingError(where, f"cannot be split into words: {exc}") from None


def _check_schema(document: Mapping[str, Any]) -> None:
    errors = sorted(validator("binding").iter_errors(document), key=lambda error: list(map(str, error.absolute_path)))
    if not errors:
        return
    error = errors[0]
    where = _dotted(error.absolute_path)
    if error.validator == "additionalProperties":
        unexpected = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        name = unexpected[0] if unexpected else "?"
        raise BindingError(
            f"{where}.{name}" if where else name,
            "is not a key of a binding",
            "see spec/schemas/binding.json for the keys a binding has",
        )
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        name = missing[0] if missing else "?"
        raise BindingError(f"{where}.{name}" if where else name, "is required", "see spec/schemas/binding.json")
    raise BindingError(
        where or "(top level)", schema_message(error, "the binding format"), "see spec/schemas/binding.json"
    )


#: Where ``{python}``, ``{port}`` and ``{state_dir}`` are filled in; anywhere else one
#: would reach the service as the literal text. A url is filled with its port only.
PLACEHOLDERS = ("{python}", "{port}", "{state_dir}")
FILLED = {
    "start.command": PLACEHOLDERS,
    "start.env": PLACEHOLDERS,
    "listing.command": PLACEHOLDERS,
    "start.url": ("{port}",),
}


def _check_placeholders(value: Any, where: str) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_placeholders(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_placeholders(item, f"{where}[{index}]")
    elif isinstance(value, str):
        filled = next((allowed for prefix, allowed in FILLED.items() if where.startswith(prefix)), ())
        unfilled = [placeholder for placeholder in PLACEHOLDERS if placeholder in value and placeholder not in filled]
        if unfilled:
            places = ", ".join(prefix for prefix, allowed in FILLED.items() if unfilled[0] in allowed)
            raise BindingError(
                where, f"{unfilled[0]} is filled in only in {places}; here it would be sent as the text {unfilled[0]}"
            )


def _dotted(parts: Sequence[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _only(section: Mapping[str, Any], where: str, foreign: Sequence[str], transport: str) -> None:
    for key in foreign:
        if key in section:
            raise BindingError(f"{where}.{key}", f"does not apply to transport {transport}")


def _check_path(path: str, where: str, kind: str, answer_roots: Mapping[str, tuple[str, ...]]) -> None:
    root = path.split(".")[0]
    roots = answer_roots[kind]
    if root not in roots:
        raise BindingError(
            where,
            f"path {path!r} matches nothing: an answer of {kind} has {', '.join(roots)}",
            f"start the path with one of {', '.join(roots)}",
        )
