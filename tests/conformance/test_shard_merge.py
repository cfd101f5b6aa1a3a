"""``run --shard K/N`` + ``merge``: the shards of one run partition its selection, and
their merged report has the scenarios, statuses and verdict of the whole run; shards
that are not one run, or not all of it, are refused with a clear error."""

from __future__ import annotations

import json

import pytest
from kit import retryproof_here
from sharded import kit

from retryproof.conformance.records import Shard
from retryproof.conformance.runner import select


def report(path) -> dict:
    return json.loads(path.read_text())


def test_shards_partition_the_selection_and_split_the_fuzz_budget():
    everything = [item.id for item in select((), ())]
    parts = [[item.id for item in select((), (), Shard(index, 3))] for index in (1, 2, 3)]
    dealt = sorted(scenario for part in parts for scenario in part if scenario != "FUZZ-MODEL")
    assert dealt == sorted(scenario for scenario in everything if scenario != "FUZZ-MODEL")
    assert all("FUZZ-MODEL" in part for part in parts)
    assert select((), (), Shard(1, 1)) == select((), ())


def test_merged_shards_equal_the_whole_run(shard_runs, tmp_path):
    done = retryproof_here(
        "merge", str(shard_runs / "one/report.json"), str(shard_runs / "two/report.json"), "--out", str(tmp_path)
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the whole run's exit code
    merged, whole = report(tmp_path / "report.json"), report(shard_runs / "whole/report.json")
    assert [(s["id"], s["status"]) for s in merged["scenarios"]] == [(s["id"], s["status"]) for s in whole["scenarios"]]
    # The verdict; a FUZZ-MODEL failure's wording names its shard's replay file (its seed).
    for key in ("conformant", "complete", "headline", "exit_code"):
        assert merged["verdict"][key] == whole["verdict"][key]
    assert [b["id"] for b in merged["verdict"]["blocking"]] == [b["id"] for b in whole["verdict"]["blocking"]]
    assert merged["verdict"]["blocking"], "the faulty runtime must not pass"
    assert merged["shard"] is None and merged["seed"] == whole["seed"]
    fuzz = next(s for s in merged["scenarios"] if s["id"] == "FUZZ-MODEL")["evidence"]["fuzz"]
    assert [share["shard"] for share in fuzz["shards"]] == ["1/2", "2/2"]
    assert len({share["seed"] for share in fuzz["shards"]}) == 2  # distinct seeds, distinct histories
    assert retryproof_here("validate-report", str(tmp_path / "report.json")).returncode == 0
    assert (tmp_path / "junit.xml").exists() and (tmp_path / "report.md").exists()


def _edited(shard_runs, tmp_path, name: str, **changes) -> str:
    document = report(shard_runs / name / "report.json")
    document.update(changes)
    path = tmp_path / f"{name}-edited.json"
    path.write_text(json.dumps(document))
    return str(path)


def _reseeded(shard_runs, tmp_path, name: str, seed: int) -> str:
    """A shard edited to another seed, its reproduce lines too (a seed alone edited is
    refused earlier: its reproduce lines would not agree with it)."""
    document = report(shard_runs / name / "report.json")
    for scenario in document["scenarios"]:
        scenario["reproduce"] = scenario["reproduce"].replace(f"--seed {document['seed']}", f"--seed {seed}")
    document["seed"] = seed
    path = tmp_path / f"{name}-reseeded.json"
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "missing shard(s) 2/2 of 2"),
        ("overlapping", "overlapping shards"),
        ("other seed", "shards of different runs: seed 10 vs 9"),
        ("other harness", "shards of different runs: target"),
        ("not a shard", "is not a shard report"),
        ("edited", "is not a valid report: counts"),
    ],
)
def test_shards_that_are_not_one_whole_run_are_refused(shard_runs, tmp_path, case, message):
    one, two = str(shard_runs / "one/report.json"), str(shard_runs / "two/report.json")
    reports = {
        "missing": lambda: [one],
        "overlapping": lambda: [one, two, one],
        "other seed": lambda: [one, _reseeded(shard_runs, tmp_path, "two", 10)],
        "other harness": lambda: [one, _edited(shard_runs, tmp_path, "two", target="--harness other")],
        "not a shard": lambda: [str(shard_runs / "whole/report.json"), two],
        "edited": lambda: [
            one,
            _edited(
                shard_runs, tmp_path, "two", counts={**report(shard_runs / "two/report.json")["counts"], "passed": 99}
            ),
        ],
    }[case]()
    done = retryproof_here("merge", *reports, "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error: " in done.stderr and message in done.stderr and "hint: " in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_bad_shard_argument_is_a_usage_error():
    done = kit("run", "--shard", "3/2")
    assert done.returncode == 2 and "K/N needs 1 <= K <= N" in done.stderr


def test_merge_holds_its_out_directory_until_every_file_is_written(shard_runs, tmp_path, monkeypatch):
    """It used to drop its claim on the directory as soon as it took it."""
    from kit import claims_while_writing

    from retryproof.conformance.cli import main

    held = claims_while_writing(monkeypatch, "retryproof.conformance.writers.files", tmp_path / "out")
    shards = [str(shard_runs / "one/report.json"), str(shard_runs / "two/report.json")]
    assert main(["merge", *shards, "--out", str(tmp_path / "out"), "--format", "md,json"]) == 1
    assert len(held) >= 2 and all(held), held


def test_merge_refuses_a_blank_format():
    done = retryproof_here("merge", "r.json", "--out", "out", "--format", "")
    assert done.returncode == 2 and "names no report format" in done.stderr, done.stderr
