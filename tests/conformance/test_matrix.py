"""``retryproof matrix --seeds``: every target runs again on further seeds, and the
matrix README says per target whether its failures and verdict came out the same.

The targets are fakes (tests/conformance/fake_harness.py behind a fake ``setup``), as
in tests/adapters/test_bundled_implementations.py: one whose behaviour changes between
its runs must be reported as differing, one that fails the same way as the same.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from argparse import Namespace
from pathlib import Path

import pytest
from kit import matrix_runs_here

from retryproof.conformance.commands import matrix
from retryproof.conformance.commands.matrix import reproduction
from retryproof.conformance.options import seed_list

FAKE = Path(__file__).resolve().parent / "fake_harness.py"


def _implementation(root: Path, name: str, modes: tuple[str, str]) -> None:
    """A fake implementation whose harness runs ``modes[0]`` on the servers of the
    first ``setup start``, ``modes[1]`` after any later one (the matrix starts them
    afresh for each seed): a library whose failures depend on the run."""
    folder = root / "adapters" / "implementations" / name
    folder.mkdir(parents=True)
    starts = folder / "starts"
    (folder / "setup").write_text(
        f'#!/usr/bin/env bash\n[ "$1" = start ] && echo x >> {shlex.quote(str(starts))}\nexit 0\n', encoding="utf-8"
    )
    (folder / "setup").chmod(0o755)
    harness = (
        f'mode={modes[1]}; [ "$(wc -l < {shlex.quote(str(starts))})" -eq 1 ] && mode={modes[0]}; '
        f"exec {shlex.quote(sys.executable)} -S {shlex.quote(str(FAKE))} $mode"
    )
    target = {"report": name, "harness": f"bash -c {shlex.quote(harness)}", "options": ["--only", "WT-CREATE"]}
    (folder / "matrix.json").write_text(json.dumps({"targets": [target]}), encoding="utf-8")


def _row(readme: str, report: str) -> list[str]:
    line = next(line for line in readme.splitlines() if line.startswith((f"| [{report}]", f"| {report} |")))
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def test_a_target_whose_failures_change_on_the_second_seed_is_named(tmp_path, monkeypatch, capsys):
    _implementation(tmp_path, "flaky", ("liar", "honest"))  # fails WT-CREATE on seed 1 only
    _implementation(tmp_path, "steady", ("liar", "liar"))  # fails it on both
    monkeypatch.setattr(matrix, "repository_root", lambda: tmp_path)
    matrix_runs_here(monkeypatch)
    out = tmp_path / "reports"
    status = matrix.main(Namespace(out=str(out), only=None, seeds=[1, 2], no_install=True))
    assert status == 1, "a target whose failures differ between seeds fails the matrix"
    assert "failures or verdict not as on seed 1 for flaky (seed 2)" in capsys.readouterr().err
    for name in ("flaky", "steady"):  # the first seed's reports are the matrix's, the second's beside them
        assert json.loads((out / name / "report.json").read_text())["seed"] == 1
        assert json.loads((out / "seed-2" / name / "report.json").read_text())["seed"] == 2
    readme = (out / "matrix" / "README.md").read_text(encoding="utf-8")
    assert "`retryproof matrix --seeds 1,2`" in readme
    assert _row(readme, "report")[-1] == "seed 2"
    assert _row(readme, "flaky")[-1].startswith("**differs**: WT-CREATE failed → passed")
    assert _row(readme, "steady")[-1] == "same (1 failed, 0 error, 0 skipped)"


def test_one_seed_gives_no_reproduction_column(tmp_path, monkeypatch):
    _implementation(tmp_path, "steady", ("liar", "liar"))
    monkeypatch.setattr(matrix, "repository_root", lambda: tmp_path)
    matrix_runs_here(monkeypatch)
    out = tmp_path / "reports"
    assert matrix.main(Namespace(out=str(out), only=None, seeds=[3], no_install=True)) == 0
    assert json.loads((out / "steady" / "report.json").read_text())["seed"] == 3
    assert not (out / "seed-3").exists()
    readme = (out / "matrix" / "README.md").read_text(encoding="utf-8")
    assert "`retryproof matrix --seeds 3`" in readme and "seed 3" not in _row(readme, "steady")


def _document(statuses: dict[str, str], headline: str = "NOT CONFORMANT") -> dict:
    return {
        "scenarios": [{"id": sid, "status": status} for sid, status in statuses.items()],
        "verdict": {"headline": headline},
    }


@pytest.mark.parametrize(
    ("first", "again", "difference"),
    [
        ({"A": "failed", "B": "passed"}, {"A": "failed", "B": "passed"}, None),
        ({"A": "failed", "B": "skipped"}, {"A": "failed", "B": "passed"}, "B skipped → passed"),  # verified once
        ({"A": "passed"}, {"A": "not_applicable"}, "A passed → not_applicable"),
        ({"A": "failed"}, {"A": "error"}, "A failed → error"),
        ({"A": "failed", "B": "passed"}, {"A": "failed", "B": "failed"}, "B passed → failed"),
        ({"A": "error"}, {}, "A error → not run"),
        ({}, {"C": "failed"}, "C not run → failed"),
    ],
)
def test_reproduction_compares_every_scenario_status(first, again, difference):
    assert reproduction(_document(first), _document(again)) == difference


def test_reproduction_compares_the_verdict():
    first, again = _document({"A": "failed"}), _document({"A": "failed"}, "NOT VERIFIED")
    assert reproduction(first, again) == "verdict NOT CONFORMANT → NOT VERIFIED"


@pytest.mark.parametrize(
    ("text", "problem"), [("1,1", "names a seed twice"), ("1,a", "not an integer seed"), (" ", "names no seed")]
)
def test_a_seed_list_names_distinct_integer_seeds(text, problem):
    with pytest.raises(argparse.ArgumentTypeError, match=problem):
        seed_list(text)
    assert seed_list("2, 1") == [2, 1]  # the first is the reports' seed, in the order given


def test_a_report_the_kit_refuses_costs_its_row_not_the_readme(tmp_path, monkeypatch, capsys):
    """A report that fails validation (the kit's own fault, as CRASH-POINTS' once was)
    is named as no valid report; every other target still gets its row."""
    _implementation(tmp_path, "broken", ("liar", "liar"))
    _implementation(tmp_path, "steady", ("liar", "liar"))
    real = matrix._run

    def run(root, target, out, seed):
        ran = real(root, target, out, seed)
        if target.report == "broken":  # a count its scenarios contradict
            document = json.loads((out / "report.json").read_text())
            document["counts"]["passed"] += 1
            (out / "report.json").write_text(json.dumps(document))
        return ran

    monkeypatch.setattr(matrix, "repository_root", lambda: tmp_path)
    matrix_runs_here(monkeypatch)
    monkeypatch.setattr(matrix, "_run", run)
    out = tmp_path / "reports"
    assert matrix.main(Namespace(out=str(out), only=None, seeds=[1], no_install=True)) == 1
    assert "matrix: no report for broken" in capsys.readouterr().err
    readme = (out / "matrix" / "README.md").read_text(encoding="utf-8")
    assert _row(readme, "steady")[-1].startswith("NOT CONFORMANT")
    assert (
        "| [broken]" not in readme
        and "No valid report (the kit could not run them, or wrote one it refuses): broken." in readme
    )
