"""What the reference harness loads to answer ``hello``: properties, not timings.

A run starts the harness about ninety times, so whatever its start imports is paid
ninety times. These tests pin the modules it must *not* load at start, so that a later
import at module level cannot silently bring them back; the figures themselves are
measured by ``benchmarks/bench_start.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from retryproof.conformance.options import REFERENCE_COMMAND
from retryproof.reference_impl import __main__ as reference_main
from retryproof.reference_impl import approval, approval_names
from retryproof.reference_impl.harness import approval_ops, build_handlers, op_groups
from retryproof.reference_impl.runtime import Runtime

# Loaded only when something asks for them: the spec's YAML and JSON Schema machinery
# (never by the harness: the kit validates), the approval service itself, argparse (the plain
# harness takes no arguments) and the signal module's enums (a crash failpoint).
# Never at start: typing (annotations are strings; the protocol messages are plain
# classes) and dataclasses (inspect with it).
NOT_AT_START = (
    "typing",
    "dataclasses",
    "yaml",
    "jsonschema",
    "referencing",
    "argparse",
    "signal",
    "importlib.metadata",
    "retryproof.conformance",
    "retryproof.adapters",
    "retryproof.reference_impl.approval",
    "retryproof.reference_impl.approval_store",
    "retryproof.reference_impl.approval_effects",
)


def answering_hello(command: list[str], state_dir) -> subprocess.CompletedProcess[str]:
    """``command`` run to its end in a fresh interpreter, a ``hello`` request on its input."""
    done = subprocess.run(
        command,
        input=json.dumps({"id": 1, "op": "hello", "args": {"protocol": "retryproof-harness/1"}}) + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, "RETRYPROOF_STATE_DIR": str(state_dir)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def loaded_after(code: str, state_dir) -> tuple[str, set[str]]:
    """What ``code`` printed, and the modules in ``sys.modules`` after it ran."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    done = answering_hello([sys.executable, "-c", probe], state_dir)
    return done.stdout, set(json.loads(done.stderr.splitlines()[-1]))


def test_a_harness_that_answered_hello_has_not_loaded_what_it_does_not_use(state_dir):
    code = "from retryproof.reference_impl.__main__ import main\nassert main([]) == 0"
    answered, loaded = loaded_after(code, state_dir)
    assert json.loads(answered)["result"]["capabilities"][-1] == approval_names.CAPABILITY
    assert sorted(loaded & set(NOT_AT_START)) == []


def test_the_harness_started_as_the_kit_starts_it_imports_none_of_them(state_dir):
    """The same, through ``REFERENCE_COMMAND`` itself (the launcher, ``reference_impl/launch.py``), with
    what it imported read from ``-X importtime``."""
    python, *arguments = REFERENCE_COMMAND
    done = answering_hello([python, "-X", "importtime", *arguments], state_dir)
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert json.loads(done.stdout)["ok"] is True and "retryproof.reference_impl.runtime" in imported
    assert sorted(imported & set(NOT_AT_START)) == []


def test_importing_the_public_names_loads_no_yaml_or_jsonschema(state_dir):
    _, loaded = loaded_after(
        "from retryproof.reference_impl import Runtime\nimport retryproof.reference_impl.harness\n"
        "import retryproof.spec.protocol, retryproof.spec.digest",
        state_dir,
    )
    assert sorted(loaded & set(NOT_AT_START)) == []


def test_a_harness_serving_every_approval_op_loads_no_yaml_jsonschema_typing_or_pathlib(state_dir):
    """The approval ops check their argument names from the shipped schema's data, not
    with a JSON Schema validator, whose import would cost each approval scenario's
    harness start more CPU than the start itself; and the approval modules go without
    typing and pathlib, about a third of such a start again."""
    code = (
        "from retryproof.reference_impl.harness import build_handlers, op_groups\n"
        "from retryproof.reference_impl.runtime import Runtime\n"
        "import os\n"
        "handlers = build_handlers(op_groups(Runtime(os.environ['RETRYPROOF_STATE_DIR'])))\n"
        "operation = handlers['propose']({'operation_key': 'k', 'request': {'n': 1}, 'executor': 'plain'})\n"
        "target = {'operation_id': operation['operation_id']}\n"
        "for op in ('approve', 'execute', 'recover', 'get_operation', 'list_audit'):\n"
        "    handlers[op](target)\n"
        "handlers['list_effects']({'operation_key': 'k'})\n"
        "print('served')"
    )
    served, loaded = loaded_after(code, state_dir)
    assert served.strip() == "served"
    # Less what a bare interpreter of this install loads (an editable install's import
    # hook loads pathlib at every start, a wheel's loads nothing of these).
    _, bare = loaded_after("pass", state_dir)
    assert sorted((loaded - bare) & {"yaml", "jsonschema", "referencing", "typing", "pathlib"}) == []


def test_the_deferred_approval_ops_are_exactly_what_the_service_serves(state_dir):
    """``hello`` and the op table come from ``approval_names``; the service must serve
    those ops and declare that capability and those failpoints, no more, no fewer."""
    declared = approval.op_group(Runtime(str(state_dir), {}))
    assert sorted(declared["handlers"]) == sorted(approval_names.OPS)
    assert declared["capabilities"] == (approval_names.CAPABILITY,)
    assert declared["failpoints"] == approval_names.FAILPOINTS
    group = approval_ops(Runtime(str(state_dir), {}))
    assert (group.capabilities, group.failpoints) == (declared["capabilities"], declared["failpoints"])


def test_the_approval_service_is_built_once_on_the_first_approval_call(state_dir, monkeypatch):
    built: list[object] = []
    real = approval.op_group

    def counting(runtime):
        built.append(runtime)
        return real(runtime)

    monkeypatch.setattr(approval, "op_group", counting)
    runtime = Runtime(str(state_dir), {})
    handlers = build_handlers(op_groups(runtime))
    assert built == [] and not (state_dir / "approval").exists()

    answers: list[Mapping[str, Any]] = []

    def propose(number: int) -> None:
        request = {"operation_key": f"key-{number}", "request": {"n": number}, "executor": "plain"}
        answers.append(handlers["propose"](request))

    callers = [threading.Thread(target=propose, args=(number,)) for number in range(8)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(30)
    assert built == [runtime]
    assert len({answer["operation_id"] for answer in answers}) == 8
    assert handlers["get_operation"]({"operation_id": answers[0]["operation_id"]})["state"] == "proposed"


def test_the_kit_starts_the_reference_without_site_and_it_answers_as_python_m_does(state_dir, tmp_path):
    """``REFERENCE_COMMAND`` runs the launcher with ``-S`` (reference_impl/launch.py says why):
    the same harness, so the same ``hello``, as ``python -m retryproof.reference_impl``."""
    python, *arguments = REFERENCE_COMMAND
    assert arguments[0] == "-S"
    launched = answering_hello([python, "-X", "importtime", *arguments], state_dir)
    imported = {line.rpartition("|")[2].strip() for line in launched.stderr.splitlines() if "import time:" in line}
    assert "site" not in imported and "retryproof.reference_impl.runtime" in imported
    (tmp_path / "other").mkdir()
    as_module = answering_hello([python, "-m", "retryproof.reference_impl"], tmp_path / "other")
    assert json.loads(launched.stdout) == json.loads(as_module.stdout)


def test_reports_show_the_launcher_as_the_command_a_reader_types():
    from retryproof.conformance.options import Options
    from retryproof.conformance.runner import harness_command

    options = Options(command=(*REFERENCE_COMMAND, "--fault", "memory-dedup"), target="", seed=1)
    assert harness_command(options.way_in.started) == "python -m retryproof.reference_impl --fault memory-dedup"


@pytest.mark.parametrize(
    "argv",
    [[], ["--fault", "memory-dedup"], ["--http"], ["--fault", "memory-dedup", "--http"]],
    ids=["plain", "fault", "http", "fault-http"],
)
def test_the_command_lines_the_kit_starts_mean_what_argparse_makes_of_them(argv):
    """The forms the kit starts skip argparse (it costs each start a few milliseconds):
    the options they give are argparse's own for them."""
    assert vars(reference_main._options(argv)) == vars(reference_main._parser().parse_args(argv))


def test_a_command_line_the_kit_does_not_start_is_argparse_s(capsys):
    with pytest.raises(SystemExit):
        reference_main._options(["--fault", "--http"])
    assert "expected one argument" in capsys.readouterr().err
    assert reference_main._options(["--wait-timeout", "2", "--http"]).wait_timeout == 2.0
