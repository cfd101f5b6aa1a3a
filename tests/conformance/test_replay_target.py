"""``replay`` without ``--harness`` replays a FUZZ-MODEL file only when its run's target
was the bundled reference, as the file records it: a custom harness may forward the
reference's hello (its implementation name too), and its history replayed against the
reference once said "not reproduced", exit 0."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from kit import retryproof_here

from retryproof.conformance import replay_file
from retryproof.conformance.events import RunInfo, RunStarted, ScenarioFinished
from retryproof.conformance.writers.files import ReplayFileWriter

#: A history the reference answers as the contract says: replayed there, nothing fails.
STEPS = [{"step": "submit", "id": "fz-a", "task": 0}, {"step": "submit", "id": "fz-a", "task": 0}]


def written_replay(tmp_path, target: str) -> dict:
    """The replay file a run with ``target`` (its CLI arguments; "" for none) writes."""
    info = RunInfo("0", "4.0.0", "p", {"name": "reference"}, target, (), (), 1, 8, "2026-01-01T00:00:00Z")
    document = {"format": replay_file.FORMAT, "seed": 1, "implementation": {"name": "reference"}, "steps": STEPS}
    writer = ReplayFileWriter(str(tmp_path))
    writer.handle(RunStarted(info, 1))
    writer.handle(ScenarioFinished(SimpleNamespace(evidence={"replay": document}), 1, 1))  # type: ignore[arg-type]
    (path,) = writer.paths
    return json.loads(Path(path).read_text())


@pytest.mark.parametrize(("target", "bundled"), [("", True), ("--harness 'python3 my_harness.py'", False)])
def test_the_replay_file_records_whether_the_target_was_the_bundled_reference(tmp_path, target, bundled):
    written = written_replay(tmp_path, target)
    assert written[replay_file.BUNDLED_REFERENCE] is bundled
    assert "my_harness" not in json.dumps(written)  # a fact, not the command (nor a path of this machine)


def test_replay_without_harness_refuses_a_file_from_another_target_with_the_references_name(tmp_path):
    path = tmp_path / "fuzz-model-reference-seed1.json"
    path.write_text(json.dumps(written_replay(tmp_path, "--harness 'python3 forwarding.py'")))
    done = retryproof_here("replay", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and "--harness" in done.stderr, done.stderr
    assert "not reproduced" not in done.stdout


def test_replay_without_harness_replays_a_file_from_the_bundled_reference(tmp_path):
    path = tmp_path / "fuzz-model-reference-seed1.json"
    path.write_text(json.dumps(written_replay(tmp_path, "")))
    done = retryproof_here("replay", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not reproduced" in done.stdout


def test_a_replay_file_whose_fact_is_not_a_boolean_is_refused(tmp_path):
    path = tmp_path / "r.json"
    document = {"format": replay_file.FORMAT, "seed": 1, "steps": STEPS, replay_file.BUNDLED_REFERENCE: "yes"}
    path.write_text(json.dumps(document))
    done = retryproof_here("replay", str(path))
    assert done.returncode == 2 and replay_file.BUNDLED_REFERENCE in done.stderr, done.stderr
