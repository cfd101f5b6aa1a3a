"""action.yml: the composite action's run step, executed by bash exactly as written,
against a stand-in ``retryproof`` that records its arguments: each input becomes its
option only when set (``--binding`` included), ``args`` is split like a shell command
line without being run, and the exit code is passed on to the verdict step."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

ACTION = os.path.join(os.path.dirname(__file__), "..", "..", "action.yml")
STAND_IN = """#!/bin/sh
for word in "$@"; do printf '%s\\n' "$word"; done > "$RECORD"
exit "$STAND_IN_EXIT"
"""


def action():
    with open(ACTION, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def run_step(tmp_path, exit_code=1, with_process=False, **inputs):
    script = next(step for step in action()["runs"]["steps"] if step.get("id") == "run")["run"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "retryproof").write_text(STAND_IN)
    (bin_dir / "retryproof").chmod(0o755)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    output, record = tmp_path / "output", tmp_path / "argv"
    for path in (output, record):
        path.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_OUTPUT": str(output),
        "RUNNER_TEMP": str(tmp_path),
        "RECORD": str(record),
        "STAND_IN_EXIT": str(exit_code),
        "RETRYPROOF_INPUT_OUT": "reports-out",
    }
    for name in ("harness", "python", "binding", "baseline", "args"):
        env[f"RETRYPROOF_INPUT_{name.upper()}"] = inputs.get(name, "")
    # GitHub runs a bash step as: bash --noprofile --norc -eo pipefail {0}
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    argv = record.read_text().splitlines() if record.exists() else None
    return (argv, output.read_text(), done) if with_process else (argv, output.read_text())


def test_the_action_declares_its_inputs_and_uploads_the_report_directory():
    document = action()
    assert document["runs"]["using"] == "composite"
    assert {"harness", "python", "binding", "baseline", "out", "args"} <= set(document["inputs"])
    upload = next(step for step in document["runs"]["steps"] if "upload-artifact" in step.get("uses", ""))
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ inputs.out }}"
    for step in document["runs"]["steps"]:
        assert "${{ inputs." not in step.get("run", ""), "inputs reach scripts as environment variables only"


def test_inputs_become_options_only_when_set(tmp_path):
    argv, output = run_step(tmp_path, harness="node harness.js --fast", args="--skip DURABILITY-TRACE --seed '7'")
    assert argv == [
        "run",
        "--out",
        "reports-out",
        "--format",
        "md,json,junit,html,badge,svg",
        "--harness",
        "node harness.js --fast",
        "--skip",
        "DURABILITY-TRACE",
        "--seed",
        "7",
    ]
    assert output == "exit-code=1\n"
    argv, output = run_step(tmp_path, exit_code=0, binding="tools.binding.yaml", baseline="known.yaml")
    assert argv[-4:] == ["--binding", "tools.binding.yaml", "--baseline", "known.yaml"]
    assert "--harness" not in argv and "--python" not in argv and output == "exit-code=0\n"


def test_args_are_split_never_run(tmp_path):
    marker = tmp_path / "ran"
    argv, _ = run_step(tmp_path, args=f"--seed 7 $(touch {marker}) ;touch {marker}")
    assert not marker.exists()
    assert argv[-6:] == ["--seed", "7", "$(touch", f"{marker})", ";touch", str(marker)]
    argv, output = run_step(tmp_path, args="--seed 'unclosed")
    assert argv is None and output == "exit-code=2\n"


def test_unsplittable_args_are_one_error_line_without_a_traceback_or_the_input(tmp_path):
    argv, output, done = run_step(tmp_path, args="--seed 'unclosed\n::error::INJECTED", with_process=True)
    assert argv is None and output == "exit-code=2\n"
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "INJECTED" not in said, said
    assert "::error::retryproof: cannot split the args input like a shell command line: No closing quotation" in said


def test_the_exit_code_output_names_every_code_the_kit_exits_with():
    text = action()["outputs"]["exit-code"]["description"]
    assert all(str(code) in text for code in (0, 1, 2, 3, 130, 143)), text
