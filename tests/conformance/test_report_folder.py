"""A report folder holds one run's files: a run (or a merge) that writes there removes
the kit's report files it did not write this time, and nothing else; a run that stops
before its reports, or cannot write them, leaves the earlier ones as they were."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from kit import retryproof_here

from retryproof.conformance.events import RunStarted, ScenarioFinished
from retryproof.conformance.writers import files

#: Files a user (or another tool) keeps in the folder: never the kit's to remove.
NOT_THE_KITS = ("notes.txt", "report.html.bak", "replays/my-notes.json", "replays/fuzz-model-seed1.txt")


def earlier_files(out: Path, *kits: str) -> dict[str, bytes]:
    """``out`` as an earlier run (``kits``) and its user (``NOT_THE_KITS``) left it."""
    for name in (*kits, *NOT_THE_KITS):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(f"earlier {name}\n")
    return contents(out)


def contents(out: Path) -> dict[str, bytes]:
    return {str(path.relative_to(out)): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}


def test_a_run_removes_the_kits_files_it_did_not_write_and_nothing_else(tmp_path):
    """An earlier run's report.html and badges (its verdict), and the replays of an
    earlier failing run, once stayed beside the new report.md."""
    out = tmp_path / "out"
    stale = ("report.html", "badge.json", "badge.svg", "replays/fuzz-model-reference-seed4.json")
    stale += ("replays/crash-points-other-runtime-seed-7.json",)
    earlier_files(out, "report.md", "junit.xml", *stale)
    done = retryproof_here("run", "--only", "WT-CREATE", "--seed", "5", "--format", "md,junit", "--out", str(out))
    assert done.returncode == 0, done.stderr
    after = contents(out)
    assert sorted(after) == sorted(["report.md", "junit.xml", *NOT_THE_KITS]), sorted(after)
    assert not after["report.md"].startswith(b"earlier")
    assert all(after[name] == f"earlier {name}\n".encode() for name in NOT_THE_KITS)


def test_a_run_that_stops_before_its_reports_leaves_the_earlier_ones(tmp_path):
    out = tmp_path / "out"
    before = earlier_files(out, "report.md", "report.html", "badge.json", "replays/fuzz-model-reference-seed4.json")
    done = retryproof_here("run", "--harness", "false", "--only", "WT-CREATE", "--out", str(out))
    assert done.returncode == 2, done.stderr  # no handshake: no run, no results
    assert contents(out) == before


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> Path:
    """A run's report.json, for ``merge``."""
    shard = tmp_path_factory.mktemp("shard")
    done = retryproof_here(
        "run", "--only", "WT-CREATE", "--seed", "5", "--shard", "1/1", "--format", "json", "--out", str(shard)
    )
    assert done.returncode == 0, done.stderr
    return shard


def test_a_merge_removes_them_too_and_keeps_the_replays_it_writes(tmp_path, shard):
    """``retryproof merge --out`` writes through the same writers; a replay file this run
    writes (here: named as an earlier one was) stays, the others go."""
    from retryproof.conformance.commands.merge import merged_run

    out = tmp_path / "out"
    earlier_files(
        out,
        "report.md",
        "report.html",
        "badge.svg",
        "replays/kill-nemesis-x-seed5.json",
        "replays/fuzz-model-x-seed5.json",
    )
    done = retryproof_here("merge", str(shard / "report.json"), "--format", "md", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(contents(out)) == sorted(["report.md", *NOT_THE_KITS])

    earlier_files(out, "replays/kill-nemesis-x-seed5.json", "replays/fuzz-model-x-seed5.json")
    writer = files.ReplayFileWriter(str(out), ("md",))
    document = {"scenario": "KILL-NEMESIS", "seed": 5, "implementation": {"name": "x"}}
    writer.handle(ScenarioFinished(SimpleNamespace(evidence={"replay": document}), 1, 1))  # type: ignore[arg-type]
    writer.handle(merged_run([str(shard / "report.json")])[0])
    assert json.loads((out / "replays/kill-nemesis-x-seed5.json").read_text())["scenario"] == "KILL-NEMESIS"
    assert not (out / "replays/fuzz-model-x-seed5.json").exists()


def test_the_emptied_replays_folder_goes_unless_something_else_is_there(tmp_path, shard):
    from retryproof.conformance.commands.merge import merged_run

    finished = merged_run([str(shard / "report.json")])[0]
    (tmp_path / "replays").mkdir()
    (tmp_path / "replays/fuzz-model-x-seed5.json").write_text("{}")
    files.ReplayFileWriter(str(tmp_path), ("json",)).handle(finished)
    assert not (tmp_path / "replays").exists()
    earlier_files(tmp_path, "replays/fuzz-model-x-seed5.json")
    files.ReplayFileWriter(str(tmp_path), ("json",)).handle(finished)
    assert sorted(os.listdir(tmp_path / "replays")) == ["fuzz-model-seed1.txt", "my-notes.json"]


def test_nothing_goes_before_the_run_finishes(tmp_path, shard):
    """A run interrupted mid-way (no RunFinished) keeps the earlier reports."""
    from retryproof.conformance.commands.merge import merged_run

    finished = merged_run([str(shard / "report.json")])[0]
    before = earlier_files(tmp_path, "report.html", "replays/fuzz-model-x-seed5.json")
    writer = files.ReplayFileWriter(str(tmp_path), ("json",))
    writer.handle(RunStarted(finished.info, 1))
    writer.handle(ScenarioFinished(finished.results[0], 1, 1))
    assert contents(tmp_path) == before
    writer.handle(finished)
    assert sorted(contents(tmp_path)) == sorted(NOT_THE_KITS)


@pytest.mark.parametrize("scenario", [None, "CRASH-POINTS", "KILL-NEMESIS"])  # None: FUZZ-MODEL's
@pytest.mark.parametrize("seed", [0, -3, 2**40])
def test_replay_names_the_kit_gives_are_its_own(scenario, seed):
    from retryproof.conformance import replay_file

    document = {"scenario": scenario, "seed": seed, "implementation": {"name": "a runtime/1.0"}}
    assert replay_file.is_file_name(replay_file.file_name(document))


@pytest.mark.parametrize("name", ["fuzz-model-seed1.txt", "my-notes.json", "fuzz-model-x.json", "other-x-seed1.json"])
def test_other_names_are_not(name):
    from retryproof.conformance import replay_file

    assert not replay_file.is_file_name(name)


class FullDisk:
    """``open`` in writers/files.py as on a full disk: the file is made, its writes fail."""

    def __init__(self, path: str, mode: str, **options: object):
        self.handle = open(path, mode, **options)  # closed by __exit__

    def __enter__(self) -> FullDisk:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.handle.close()

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_is_the_machines_problem_named_with_the_file(tmp_path, monkeypatch):
    """It was reported as a bug in the kit (exit 3, "retryproof crashed: OSError"), named
    no file, and lost the verdict. An injected error: the file system's own (ENOSPC on
    a small tmpfs) gives the same, but mounting one needs privileges a test cannot assume."""
    out = tmp_path / "out"
    before = earlier_files(out, "report.md", "report.json", "junit.xml", "report.html")
    monkeypatch.setattr(files, "open", FullDisk, raising=False)
    done = retryproof_here("run", "--only", "WT-CREATE", "--seed", "5", "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[0] == f"error: cannot write {out / 'report.md'}: No space left on device"
    assert done.stderr.splitlines()[1].startswith("hint: make room on that file system")
    assert "PARTIAL (partial run: 1 of" in done.stdout  # the verdict, printed before the files
    assert contents(out) == before  # the earlier reports kept whole, no temporary file left


def test_a_full_disk_elsewhere_is_the_machines_problem_too(tmp_path):
    """A write the kit does not name (here the step summary's, on /dev/full: a real ENOSPC)."""
    env = {**os.environ, "GITHUB_STEP_SUMMARY": "/dev/full"}
    done = retryproof_here("run", "--only", "WT-CREATE", "--seed", "5", "--out", str(tmp_path), env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[0] == "error: a write failed: No space left on device", done.stderr
