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


def test_digest_jsonl_answers_every_line_blank_ones_too_and_errors_name_their_line():
    """A CI pipeline pairs input and output with ``paste``: blank lines were skipped (2
    answers for 4 lines), and an error in a field lost its line number."""
    from retryproof.conformance.commands.digest import digest_lines
    from retryproof.spec.digest import request_digest

    lines = [b'{"subject":"a"}\n', b"\n", b"   \n", b'{"subject":"b"}\n', b'{"bogus":1}\n', b"not json\n", b"{}"]
    answers = list(digest_lines(lines, canonical=False))
    assert len(answers) == len(lines)
    assert answers[:4] == [request_digest({"subject": "a"}), "", "", request_digest({"subject": "b"})]
    assert answers[4].startswith("error invalid_request line 5 task.bogus: ")
    assert answers[5].startswith("error invalid_request line 6 task: is not a JSON value")
    assert answers[6] == request_digest({})
