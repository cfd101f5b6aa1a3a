"""A binding file, checked and turned into a typed ``Binding``.

Everything that can be wrong with a binding is found here, before any server starts:
the schema (``spec/schemas/binding.json``: unknown keys, wrong types), the transport's
own rules (an mcp call names a tool, an http call a method and path) and every answer
path, whose first segment must be a part the transport's answers have. A problem is a
``BindingError`` naming the key, which the kit reports as a user error.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retryproof.adapters.binding.transports import Transport, wire
from retryproof.spec import validator
from retryproof.spec.digest import ARRAY_FIELDS, SCALAR_FIELDS
from retryproof.spec.schema_messages import schema_message

FORMAT = "retryproof-binding/1"
#: The parts of a listing command's answer (its JSON output); a transport's answers
#: have the parts its ``Transport.answer_roots`` names.
COMMAND_ROOTS = ("body",)
#: What an answer rule may say the call did.
MEANINGS = ("created", "reused", "conflict", "in_flight", "invalid_key", "invalid_request")


class BindingError(Exception):
    """A binding the kit cannot use; ``key`` is where in the file (dotted)."""

    def __init__(self, key: str, problem: str, hint: str | None = None):
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem
        self.hint = hint


@dataclass(frozen=True)
class Rule:
    when: Mapping[str, Any]
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
    task_fields: Mapping[str, str]  # task field -> the argument or body member it travels as
    task_id: str
    rules: tuple[Rule, ...]
    listing: Mapping[str, Any]
    offers: tuple[str, ...]
    claims: tuple[str, ...]
    recovery_s: float = 0.0

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
    rules = []
    for index, rule in enumerate(answers["outcomes"]):
        for path in rule["when"]:
            _check_path(path, f"answers.outcomes[{index}].when.{path}", transport, roots)
        rules.append(Rule(dict(rule["when"]), rule["means"]))
    for needed in ("created", "reused"):
        if needed not in {rule.means for rule in rules}:
            raise BindingError(
                "answers.outcomes",
                f"no rule means {needed}",
                "the kit must tell a call that made the effect from one that answered an earlier effect (for example status 201 against 200 with Idempotent-Replayed: true)",
            )
    listing_kind = "command" if "command" in listing else transport
    _check_path(listing["items"], "listing.items", listing_kind, roots)
    if "resource" in listing and listing["items"].split(".")[0] != "text":
        raise BindingError(
            "listing.items", "a resource listing is read as the JSON text of the resource: start with text"
        )
    task = call.get("task") or {}
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
        task_fields=task.get("fields") or {field: field for field in (*SCALAR_FIELDS, *ARRAY_FIELDS)},
        task_id=answers["task_id"],
        rules=tuple(rules),
        listing=dict(listing),
        offers=tuple(document.get("offers", ())),
        claims=tuple(document.get("claims", ())),
        recovery_s=float(document.get("recovery_s", 0)),
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
#: would reach the service as the literal text.
FILLED = ("start.command", "start.url", "listing.command")
PLACEHOLDERS = ("{python}", "{port}", "{state_dir}")


def _check_placeholders(value: Any, where: str) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_placeholders(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_placeholders(item, f"{where}[{index}]")
    elif isinstance(value, str) and not where.startswith(FILLED):
        used = [placeholder for placeholder in PLACEHOLDERS if placeholder in value]
        if used:
            raise BindingError(
                where,
                f"{used[0]} is filled in only in {', '.join(FILLED)}; here it would be sent as the text {used[0]}",
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
