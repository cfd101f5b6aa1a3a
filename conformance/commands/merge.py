"""``retryproof merge REPORT.json... --out DIR``: the shards of one run as one report.

``retryproof run --shard K/N`` runs a deterministic part of a selection, so a CI matrix
(or several machines) can share it; merging every shard's report.json gives the report,
the verdict and the exit code a whole run would have given. The shards must be one run
split up: the same kit, harness, implementation, seed and options, every index 1..N once.

A scenario split across shards (FUZZ-MODEL: each shard explores its share of the
example budget under a seed of its own) becomes one result: failed if any shard's
failed (that shard's reason, replay and reproduce line are kept), else error if any
ended in error, else the common status; its calls and fuzz figures add up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from retryproof.conformance.commands.validate_report import judged_by_this_text, load_report
from retryproof.conformance.errors import KitError
from retryproof.conformance.events import (
    RunFinished,
    RunInfo,
    RunStarted,
    ScenarioFinished,
    ScenarioResult,
    ScenarioStarted,
    Sink,
)
from retryproof.conformance.records import Shard
from retryproof.conformance.runner import SPLIT_ACROSS_SHARDS, select
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers.document import scenario_result
from retryproof.spec import SPEC_VERSION

#: Fields every shard of one run shares (report.json keys).
SAME_RUN = (
    "kit",
    "spec_version",
    "spec_fingerprint",
    "protocol",
    "implementation",
    "target",
    "capabilities",
    "failpoints",
    "seed",
    "concurrency",
    "baseline",
    "selection",
)
#: Worst first: the status a split scenario takes when its shards disagree.
SPLIT_STATUS_ORDER = ("failed", "error", "skipped", "not_applicable", "passed")


def load_shard(path: str) -> dict[str, Any]:
    """One shard's report.json: a valid report (``validate-report``'s checks, so a shard
    edited by hand is refused), marked as a shard."""
    document = load_report(path)
    if not judged_by_this_text(document):
        # The merged verdict is judged again, by this kit's catalogue and rules.
        raise KitError(
            f"{path} was judged under another spec text (spec {document['spec_version']}), not this kit's",
            f"merge shards run by this kit (spec {SPEC_VERSION}); run the shards again",
        )
    if not document.get("shard"):
        raise KitError(
            f"{path} is not a shard report (it has no 'shard')",
            "merge the report.json files of 'retryproof run --shard K/N' runs, one per K",
        )
    return document


def check_one_run(paths: Sequence[str], documents: Sequence[Mapping[str, Any]]) -> int:
    """The shard count, once the shards are proved to be one run, each index once."""
    from retryproof.conformance import __version__

    first = documents[0]
    for path, document in zip(paths[1:], documents[1:], strict=True):
        for key in SAME_RUN + ("shard count",):
            mine, theirs = (
                (document["shard"]["count"], first["shard"]["count"])
                if key == "shard count"
                else (document.get(key), first.get(key))
            )
            if mine != theirs:
                raise KitError(
                    f"{path} and {paths[0]} are shards of different runs: {key} {_show(mine)} vs {_show(theirs)}",
                    "merge the shards of one run: one kit, harness, seed and selection, split by --shard K/N",
                )
    if first["kit"]["version"] != __version__:
        raise KitError(
            f"the shards were run by retryproof {first['kit']['version']}, this is {__version__}",
            "merge with the kit version that ran the shards",
        )
    count = first["shard"]["count"]
    seen: dict[int, str] = {}
    for path, document in zip(paths, documents, strict=True):
        index = document["shard"]["index"]
        if index in seen:
            raise KitError(
                f"overlapping shards: {seen[index]} and {path} are both shard {index}/{count}",
                "give each shard's report once",
            )
        seen[index] = path
    missing = [f"{index}/{count}" for index in range(1, count + 1) if index not in seen]
    if missing:
        raise KitError(
            f"missing shard(s) {', '.join(missing)} of {count}",
            "a merged report must hold every shard; pass the report.json of each",
        )
    return count


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)[:200]


def merge_split(parts: Sequence[ScenarioResult]) -> ScenarioResult:
    """One result for a scenario every shard ran a share of (see the module doc)."""
    decisive = min(parts, key=lambda part: SPLIT_STATUS_ORDER.index(part.status))
    evidence = dict(decisive.evidence)
    shares = [part.evidence["fuzz"] for part in parts if isinstance(part.evidence.get("fuzz"), Mapping)]
    if shares:
        evidence["fuzz"] = {
            "examples": sum(share.get("examples") or 0 for share in shares),
            "seconds": round(sum(share.get("seconds") or 0 for share in shares), 2),
            "shards": shares,
        }
    return ScenarioResult(
        entry=decisive.entry,
        status=decisive.status,
        reason=decisive.reason,
        duration_s=sum(part.duration_s for part in parts),
        reproduce=decisive.reproduce,
        evidence=evidence,
        calls=tuple(call for part in parts for call in part.calls),
        stderr=decisive.stderr,
        baseline=decisive.baseline,
    )


def merged_results(paths: Sequence[str], documents: Sequence[Mapping[str, Any]], count: int) -> list[ScenarioResult]:
    """Every scenario of the selection once, in catalogue order; each shard must hold
    exactly the part ``--shard K/N`` gives it."""
    selection = documents[0]["selection"]
    by_id: dict[str, list[ScenarioResult]] = {}
    for path, document in zip(paths, documents, strict=True):
        shard = Shard(document["shard"]["index"], count)
        expected = [item.id for item in select(selection["only"], selection["skip"], shard)]
        held = [scenario["id"] for scenario in document["scenarios"]]
        if held != expected:
            raise KitError(
                f"{path} does not hold what shard {shard} of this selection holds: "
                f"extra {sorted(set(held) - set(expected))}, lacking {sorted(set(expected) - set(held))}",
                "merge reports written by 'retryproof run --shard' unchanged",
            )
        for scenario in document["scenarios"]:
            by_id.setdefault(scenario["id"], []).append(scenario_result(scenario))
    return [
        merge_split(by_id[item.id]) if item.id in SPLIT_ACROSS_SHARDS else by_id[item.id][0]
        for item in select(selection["only"], selection["skip"])
    ]


def merged_run(paths: Sequence[str]) -> tuple[RunFinished, int]:
    documents = [load_shard(path) for path in paths]
    count = check_one_run(paths, documents)
    results = merged_results(paths, documents, count)
    first = documents[0]
    info = RunInfo(
        kit_version=first["kit"]["version"],
        spec_version=first["spec_version"],
        spec_fingerprint=first.get("spec_fingerprint", ""),
        protocol=first["protocol"],
        implementation=first["implementation"],
        target=first["target"],
        capabilities=tuple(first["capabilities"]),
        failpoints=tuple(first["failpoints"]),
        seed=first["seed"],
        concurrency=first["concurrency"],
        started_at=min(document["started_at"] for document in documents),
        baseline=first["baseline"],
        only=tuple(first["selection"]["only"]),
        skip=tuple(first["selection"]["skip"]),
        # Where the first shard ran; the others may have run elsewhere (a CI matrix).
        harness_command=first.get("environment", {}).get("harness_command", ""),
        python=first.get("environment", {}).get("python", ""),
        platform=first.get("environment", {}).get("platform", ""),
        black_box=first.get("black_box", False),
    )
    # The baseline's ids are those its markings name; the file itself may be elsewhere now.
    baseline = frozenset(result.entry.id for result in results if result.baseline)
    # The shards ran side by side: the longest is the wall time of the whole.
    duration = max(document["duration_s"] for document in documents)
    return RunFinished(
        info, tuple(results), judge(results, baseline, info.black_box, info.capabilities), duration
    ), count


def replay(finished: RunFinished, sinks: Sequence[Sink]) -> None:
    """The merged run's events, as a run would have emitted them."""
    events: list[Any] = [RunStarted(finished.info, len(finished.results))]
    for index, result in enumerate(finished.results, 1):
        events += [ScenarioStarted(result.entry, index, len(finished.results))]
        events += [ScenarioFinished(result, index, len(finished.results))]
    for event in [*events, finished]:
        for sink in sinks:
            sink.handle(event)


def main(args) -> int:
    from retryproof.conformance.writers.console import ConsoleWriter
    from retryproof.conformance.writers.files import ReplayFileWriter, ReportFileWriter, prepare_directory
    from retryproof.conformance.writers.step_summary import from_environment as step_summary

    finished, count = merged_run(args.reports)
    with prepare_directory(args.out):
        summaries = step_summary()  # the sharded recipe's verdict job reads it
        writers = [ReportFileWriter(args.out, fmt) for fmt in args.format]  # checked by options.report_formats
        replays = ReplayFileWriter(args.out, args.format)
        print(f"merged {count} shard(s) of one run:")
        replay(finished, [ConsoleWriter(), *writers, replays, *summaries])
    for path in [writer.path for writer in writers] + replays.paths:
        print(f"wrote {path}")
    return finished.verdict.exit_code
