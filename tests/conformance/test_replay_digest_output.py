"""What ``replay`` and ``digest --jsonl`` print: only what stays true after they end."""

from __future__ import annotations

import json
import shlex

from kit import REFERENCE, retryproof_here

from retryproof.conformance import replay_file


def test_a_scenario_replay_names_no_file_it_removes(tmp_path):
    """It printed "wrote /tmp/retryproof-replay-XXXX/work/report.json", a file gone
    when the command ended."""
    document = replay_file.scenario_replay("WT-CREATE", 5, {"name": "reference"}, {})
    path = tmp_path / "crash-points-reference-seed5.json"
    path.write_text(json.dumps(document))
    done = retryproof_here("replay", str(path), "--harness", shlex.join(REFERENCE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED         WT-CREATE" in done.stdout and "not reproduced" in done.stdout
    assert "wrote " not in done.stdout, done.stdout
