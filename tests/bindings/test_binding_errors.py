"""A binding the kit cannot use is a user error naming the file and the key, exit 2,
found before any server starts."""

from __future__ import annotations

import pytest
from binding_helpers import run_cli, shipped, write_binding

from retryproof.adapters.binding import BindingError, parse


def marker(tmp_path):
    """A start command that leaves a file behind if it is ever run."""
    started = tmp_path / "server-started"
    return ["{python}", "-c", f"open({str(started)!r}, 'w').close()"], started


def assert_binding_error(done, path, *words):
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: ") and f"binding {path}" in lines[0], done.stderr
    assert any(line.startswith("hint: ") for line in lines), done.stderr
    for word in words:
        assert word in lines[0], (word, done.stderr)


def test_bad_yaml_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("binding: retryproof-binding/1\nstart: {command: [python\n", encoding="utf-8")
    done = run_cli("run", "--binding", str(path), "--out", str(tmp_path / "out"))
    assert_binding_error(done, path, "is not YAML")


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda doc: doc["call"].update(kye={"header": "Idempotency-Key"}), "call.kye"),
        (lambda doc: doc.update(listng={}), "listng"),
        (
            lambda doc: doc["answers"]["outcomes"][0]["when"].update({"bdy.task_id": 1}),
            "answers.outcomes[0].when.bdy.task_id",
        ),
        (lambda doc: doc["answers"].update(task_id="result.task_id"), "answers.task_id"),
        (lambda doc: doc["listing"].update(items="tasks"), "listing.items"),
        (lambda doc: doc["call"].update(key={"argument": "idempotency_key"}), "call.key.argument"),
        (
            lambda doc: doc["answers"].update(outcomes=[{"when": {"status": 200}, "means": "reused"}]),
            "answers.outcomes",
        ),
        (
            lambda doc: doc["answers"]["outcomes"][0]["when"].update({"body.error": {"pattern": "(unclosed"}}),
            "answers.outcomes[0].when.body.error.pattern",
        ),
        (
            lambda doc: doc["answers"]["outcomes"][0]["when"].update({"status": {"pattern": "^2"}}),
            "answers.outcomes[0].when.status.pattern",
        ),
        (lambda doc: doc["call"].update(constants={"subject": "x"}), "call.constants.subject"),
        (lambda doc: doc["call"].update(task={"fields": {}}), "call.task.fields"),
        (lambda doc: doc["answers"]["outcomes"][0].update(means="maybe"), "answers.outcomes[0].means"),
        (lambda doc: doc.pop("listing"), "listing"),
    ],
    ids=[
        "unknown key",
        "unknown top-level key",
        "unknown answer part",
        "mcp part in http",
        "listing path",
        "mcp key in http",
        "no created rule",
        "pattern that does not compile",
        "pattern on a number",
        "constant named like a field",
        "a task model without fields",
        "unknown meaning",
        "missing listing",
    ],
)
def test_a_bad_binding_names_the_key_and_starts_nothing(tmp_path, edit, key):
    document = shipped("reference-http")
    document["start"]["command"], started = marker(tmp_path)
    edit(document)
    path = write_binding(tmp_path, document)
    done = run_cli("run", "--binding", str(path), "--out", str(tmp_path / "out"))
    assert_binding_error(done, path, f": {key}:")
    assert not started.exists()


def test_a_missing_binding_file_is_a_user_error(tmp_path):
    done = run_cli("run", "--binding", str(tmp_path / "nope.yaml"))
    assert_binding_error(done, tmp_path / "nope.yaml", "cannot read")


def test_every_shipped_binding_parses():
    for name in ("reference-http", "reference-mcp", "reference-mcp-http"):
        binding = parse(shipped(name), name)
        assert binding.offers == ("legacy", "multiprocess")
        assert binding.protocol_parts == ("write-task-v1",)


def test_mcp_over_stdio_cannot_take_a_header_key():
    document = shipped("reference-mcp")
    document["call"]["key"] = {"header": "Idempotency-Key"}
    with pytest.raises(BindingError) as caught:
        parse(document, "x.yaml")
    assert caught.value.key == "call.key.header"


def test_a_server_that_never_listens_is_a_start_error_with_its_stderr(tmp_path):
    document = shipped("reference-http")
    document["start"]["command"] = ["{python}", "-c", "import sys; sys.stderr.write('no port for me\\n')"]
    path = write_binding(tmp_path, document)
    done = run_cli("run", "--binding", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "exited with status 0 before accepting" in done.stderr and "no port for me" in done.stderr


def test_start_env_is_filled_and_commands_run_beside_the_binding_file(tmp_path):
    document = shipped("reference-http")
    document["start"]["env"] = {"ORDERS_DB": "{state_dir}/orders.db", "PORT_TOO": "{port}"}
    binding = parse(document, str(tmp_path / "service.yaml"))
    assert binding.start_env(8080, "/state") == {"ORDERS_DB": "/state/orders.db", "PORT_TOO": "8080"}
    assert binding.directory == str(tmp_path)
