"""What a binding run's report says it certified: the server the binding starts and
the binding format, never the bundled reference harness and the harness protocol."""

from __future__ import annotations

import pytest
from binding_helpers import run_binding, run_cli, shipped, write_binding


def test_a_binding_run_names_its_server_command_and_the_binding_format(tmp_path):
    done, report = run_binding(tmp_path, "reference-http", "WT-CREATE", "--format", "json,md,html")
    assert report["protocol"] == "retryproof-binding/1", report["protocol"]
    command = report["environment"]["harness_command"]
    assert command == "python -m retryproof.reference_impl --http", command
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| server command (binding) | python -m retryproof.reference\\_impl --http" in markdown
    assert "the bundled reference runtime" not in markdown and "retryproof-harness/1" not in markdown
    assert "{python}" not in (tmp_path / "out" / "report.html").read_text()


def test_an_mcp_server_answering_under_ids_never_asked_for_is_named_at_the_deadline(tmp_path):
    """Such answers used to be dropped silently: the handshake ended "no answer"."""
    server = tmp_path / "wrong_ids.py"
    server.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    message = json.loads(line)\n"
        "    if 'id' in message:\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': message['id'] + 1000, 'result': {}}), flush=True)\n"
    )
    document = shipped("reference-mcp")
    document["start"]["command"] = ["{python}", str(server)]
    binding = write_binding(tmp_path, document)
    done = run_cli(
        "run", "--binding", str(binding), "--only", "WT-CREATE", "--start-timeout", "2", "--out", str(tmp_path / "o")
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the server sent 1 answer(s) under ids never asked for (1001)" in done.stderr, done.stderr


def test_a_listing_that_is_not_utf8_says_so(tmp_path):
    document = shipped("reference-http")
    document["listing"] = {
        "command": ["printf", "\\377\\376"],
        "items": "body.tasks",
        "task_id": "task_id",
        "key": "k",
        "task": "task",
    }
    binding = write_binding(tmp_path, document)
    _, report = run_binding(tmp_path, binding, "WT-CREATE")
    reason = report["scenarios"][0]["reason"]
    assert "not UTF-8 text: invalid start byte at byte 0" in reason, reason


def test_an_unmapped_answer_shows_the_headers_the_rules_test():
    from retryproof.adapters.binding import answers, parse

    http = parse(shipped("reference-http"), "reference-http")
    answer = {"status": 200, "header": {"idempotent-replayed": "TRUE", "x-other": "noise"}, "body": {"task_id": "T-1"}}
    assert answers.meaning(http, answer) is None
    text = answers.describe(answer, http)
    assert "header idempotent-replayed: TRUE" in text and "x-other" not in text, text


def test_a_placeholder_where_nothing_fills_it_is_a_binding_error(tmp_path):
    document = shipped("reference-http")
    document["listing"]["get"] = "/tasks?dir={state_dir}"
    binding = write_binding(tmp_path, document)
    done = run_cli("run", "--binding", str(binding), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "listing.get: {state_dir} is filled in only in start.command, start.env, listing.command" in done.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/{state_dir}", "http://127.0.0.1:{port}/{python}"])
def test_a_url_is_filled_with_its_port_only(url):
    """A state directory or an interpreter's path in a url would reach the service as text."""
    from retryproof.adapters.binding import BindingError, parse

    document = shipped("reference-http")
    document["start"]["url"] = url
    with pytest.raises(BindingError, match=r"start\.url: \{(state_dir|python)\} is filled in only in start\.command"):
        parse(document, "reference-http")


def test_binding_errors_show_values_as_json_not_python(tmp_path):
    """YAML's yes is true: the error said [True]."""
    document = shipped("reference-http")
    document["start"]["command"] = [True]
    binding = write_binding(tmp_path, document)
    done = run_cli("run", "--binding", str(binding), "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "start.command: [true] is none of the forms the binding format allows here" in done.stderr, done.stderr
    assert "True" not in done.stderr


def test_the_evidence_keeps_each_calls_raw_answer_and_the_rule_that_read_it(tmp_path):
    _, report = run_binding(tmp_path, "reference-http", "RESTART-REUSE")
    exchanges = report["scenarios"][0]["evidence"]["exchanges"]
    created, reused = exchanges[0], exchanges[-1]
    assert created["answer"]["status"] == 201 and created["rule"] == "outcomes[0]: created", created
    assert reused["answer"]["header"]["idempotent-replayed"] == "true" and reused["rule"].endswith(": reused")
    assert created["key"] == reused["key"] and '"task_id"' in created["answer"]["body"]
