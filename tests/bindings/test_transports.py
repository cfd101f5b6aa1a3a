"""The wires under a binding: one registry, agreeing with the binding schema, and a new
wire served by its own module and one registry line, with nothing else to edit."""

from __future__ import annotations

import copy

import pytest
from binding_helpers import shipped

from retryproof.adapters.binding import BindingError, binding_file, parse
from retryproof.adapters.binding.connection import BindingConnection
from retryproof.adapters.binding.transports import TRANSPORTS
from retryproof.adapters.binding.transports.http_api import HttpApi
from retryproof.spec import schema, validator


def test_the_registry_names_every_transport_of_the_schema_and_no_other():
    assert sorted(TRANSPORTS) == sorted(schema("binding")["properties"]["transport"]["enum"])


def test_each_transport_has_at_most_one_wire_with_a_url_and_one_without():
    for transport, wires in TRANSPORTS.items():
        assert sorted(wire.listens for wire in wires) in ([False], [True], [False, True]), transport


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("reference-http", "http"),
        ("reference-mcp", "mcp over stdio"),
        ("reference-mcp-http", "mcp over streamable HTTP"),
    ],
)
def test_each_shipped_binding_gets_its_wire_named_as_reports_name_it(name, label):
    assert parse(shipped(name), f"{name}.yaml").target == label


def test_a_transport_without_the_wire_its_url_asks_for_is_a_binding_error():
    document = shipped("reference-http")
    del document["start"]["url"]
    with pytest.raises(BindingError) as raised:
        parse(document, "no-url.yaml")
    assert (raised.value.key, raised.value.problem) == (
        "start.url",
        "an http binding needs the url the service listens on",
    )


class LoggedHttp(HttpApi):
    """A new wire: plain HTTP that counts its calls, registered under a new name."""

    label = "logged http"
    calls = 0

    def call(self, arguments, key, timeout):
        LoggedHttp.calls += 1
        return super().call(arguments, key, timeout)


def test_a_new_wire_needs_only_its_class_a_registry_line_and_the_schema_enum(tmp_path, monkeypatch):
    monkeypatch.setitem(TRANSPORTS, "logged-http", (LoggedHttp,))
    extended = copy.deepcopy(schema("binding"))
    extended["properties"]["transport"]["enum"].append("logged-http")
    monkeypatch.setattr(binding_file, "validator", lambda name: type(validator(name))(extended))
    document = shipped("reference-http")
    document["transport"] = "logged-http"
    binding = parse(document, "logged.yaml")
    state = tmp_path / "state"
    state.mkdir()
    connection = BindingConnection(binding, str(state), start_timeout=60)
    try:
        hello = connection.start()
        created = connection.call("write_task", {"client_submission_id": "k1", "task": _task()})
        listed = connection.call("list_tasks", {})
    finally:
        connection.kill()
    assert hello["implementation"]["language"] == "logged http"
    assert created.result["disposition"] == "created", created
    assert [task["client_submission_id"] for task in listed.result["tasks"]] == ["k1"], listed
    assert LoggedHttp.calls == 1


def _task():
    return {"sender": "PM", "recipient": "DEV", "subject": "Ship it", "body": "today", "references": []}
