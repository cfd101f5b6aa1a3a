"""``retryproof validate-report``: what it finds wrong with a report.json.

First the shape (``spec/schemas/report.json``); then, for a well-shaped report, that its
summary agrees with its own scenario list: the counts with the statuses, and the
verdict and checklist with what ``retryproof.conformance.verdict`` makes of those statuses. A
report edited by hand (a failure turned into a pass, a count raised) is caught even
when each part alone has a valid shape. Problems are plain sentences with JSON values,
never Python reprs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from retryproof import spec
from retryproof.conformance.errors import KitError, load_user_file, strict_json
from retryproof.conformance.events import ScenarioResult
from retryproof.conformance.records import STATUSES, Verdict
from retryproof.conformance.verdict import judge
from retryproof.conformance.writers.document import scenario_result
from retryproof.spec.schema_messages import schema_message

#: The scenario whose pass lists no calls (``_judged_on_problems``).
FUZZ_MODEL = "FUZZ-MODEL"
#: Problems printed at most; a report broken everywhere needs no thousand lines.
MAX_PROBLEMS = 20


def report_problems(document: Any) -> list[str]:
    """Every problem found, as ``<where>: <what>`` lines (empty: a valid report)."""
    shape = sorted(spec.validator("report").iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    if shape:
        return [
            f"{'/'.join(map(str, error.absolute_path)) or '(document)'}: {schema_message(error, 'the report format')}"
            for error in shape
        ]
    try:
        results = [scenario_result(scenario) for scenario in document["scenarios"]]
    except KeyError as exc:
        return [
            f"scenarios: {json.dumps(exc.args[0])} is not a scenario of this kit's catalogue (a report of another kit version?)"
        ]
    if not judged_by_this_text(document):
        # Its catalogue and verdict rules were another text's: only what the report
        # says of itself can be checked (its scenarios' own needs, counts, reproduce lines).
        return [
            *_fingerprint_problems(document),
            *_need_problems(document, results, own_needs=True),
            *_judged_on_problems(results),
            *_reproduce_problems(document),
            *_count_problems(document["counts"], results),
        ]
    return [
        *_fingerprint_problems(document),
        *_catalogue_problems(document["scenarios"], results),
        *_need_problems(document, results),
        *_judged_on_problems(results),
        *_reproduce_problems(document),
        *_count_problems(document["counts"], results),
        *_verdict_problems(document, results),
    ]


def judged_by_this_text(document: dict[str, Any]) -> bool:
    """Whether the report was judged under the spec text this kit carries: the same
    fingerprint, or, for a report from before fingerprints, the same spec_version. A
    report of another text (an older release, or an unreleased version's earlier files)
    may list other scenarios, needs and levels; this kit's catalogue cannot recheck it."""
    stated = document.get("spec_fingerprint")
    if stated is not None:
        return bool(stated == spec.fingerprint())
    return bool(document["spec_version"] == spec.SPEC_VERSION)


def read_report(path: str) -> Any:
    """A report.json as JSON, unchecked; an unreadable file is a ``KitError``."""
    return load_user_file(path, "report", strict_json, "JSON", "pass the report.json of a run (not report.md)")


def load_report(path: str) -> dict[str, Any]:
    """A report.json that passes every check here, for the commands that read reports
    (diff, compare, merge); an invalid one is a ``KitError`` naming its first problem."""
    document = read_report(path)
    problems = report_problems(document)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise KitError(
            f"{path} is not a valid report: {problems[0]}{more}",
            f"'retryproof validate-report {path}' lists every problem",
        )
    return document


def main(args) -> int:
    """Exit 0 for a valid report, 1 for an invalid one (problems on stderr)."""
    document = read_report(args.file)
    problems = report_problems(document)
    if problems:
        for problem in problems[:MAX_PROBLEMS]:
            print(f"{args.file}: {problem}", file=sys.stderr)
        print(f"{args.file}: INVALID ({len(problems)} problem(s))", file=sys.stderr)
        return 1
    print(f"{args.file}: valid report ({document['verdict']['headline']})")
    if not judged_by_this_text(document):
        print(
            f"{args.file}: judged under another spec text (spec {document['spec_version']}, "
            f"fingerprint {document.get('spec_fingerprint') or 'not recorded'}): its own needs, counts and reproduce "
            f"lines were checked; its catalogue and verdict are not rechecked by this kit (spec {spec.SPEC_VERSION})"
        )
    return 0


def _fingerprint_problems(document: dict[str, Any]) -> list[str]:
    """A released ``spec_version`` names one text (``spec/releases.json``): a report that
    claims it with other files' fingerprint was judged by something else."""
    stated, recorded = document.get("spec_fingerprint"), spec.releases().get(document["spec_version"])
    if stated is None or recorded is None or stated == recorded:
        return []
    return [
        f"spec_fingerprint: says {json.dumps(stated)}, but spec {document['spec_version']} was released as {json.dumps(recorded)}"
    ]


#: Statuses a scenario reaches only by running, so only when its needs were met.
RAN = ("passed", "failed", "not_applicable")


def _catalogue_problems(scenarios: list[dict[str, Any]], results: list[ScenarioResult]) -> list[str]:
    """A scenario's level and needs are the catalogue's, not the report's to choose:
    a MUST failure relabelled SHOULD, or a need struck out, would change what the
    rest of the report is checked against."""
    return [
        f"scenarios/{index}/{key}: says {json.dumps(scenario[key])}, but {result.entry.id} has {json.dumps(expected)} in the catalogue"
        for index, (scenario, result) in enumerate(zip(scenarios, results, strict=True))
        for key, expected in (("level", result.entry.level), ("needs", list(result.entry.needs)))
        if scenario[key] != expected
    ]


def _need_problems(document: dict[str, Any], results: list[ScenarioResult], own_needs: bool = False) -> list[str]:
    """A scenario that ran had what it needs: the capabilities and failpoints the
    runtime declared in its hello (the report's own ``capabilities`` and
    ``failpoints``). A forged pass of a scenario the runtime could not run shows here
    even when counts, verdict and checklist were edited to match. The needs are the
    catalogue's, or with ``own_needs`` (a report of another spec text) the report's."""
    declared = {*document["capabilities"], *(f"failpoint:{name}" for name in document["failpoints"])}
    problems = []
    for index, result in enumerate(results):
        needs = document["scenarios"][index]["needs"] if own_needs else result.entry.needs
        lacking = [
            need for need in needs if need not in declared and (":" not in need or need.startswith("failpoint:"))
        ]
        if result.status in RAN and lacking:
            problems.append(
                f"scenarios/{index}: {result.entry.id} is {result.status}, but it needs {', '.join(lacking)}, "
                "which the runtime's hello (capabilities, failpoints) does not declare"
            )
    return problems


#: Statuses the verdict counts as met (VERDICT-R1): a scenario ends so only by judging
#: the runtime, so its result carries what it was judged on. A failure stands on its
#: reason (a harness that died before any call leaves none to list), and error and
#: skipped end without a judgement.
MET = ("passed", "not_applicable")
#: Calls of the runtime, not faults the kit caused.
CALL_KINDS = ("ok", "fail", "info")


def _judged_on_problems(results: list[ScenarioResult]) -> list[str]:
    """A scenario whose status counts as met carries the evidence and the calls it
    was judged on: a report whose passes were emptied of both vouches for nothing,
    however well its counts and verdict agree. FUZZ-MODEL lists none of the thousands
    of calls its exploration made (scenarios/fuzz_model.py); its evidence's ``fuzz``
    record names the examples it ran instead."""
    problems = []
    for index, result in enumerate(results):
        if result.status not in MET:
            continue
        lacking = [] if result.evidence else ["its evidence is empty"]
        if result.entry.id == FUZZ_MODEL and result.status == "passed":
            fuzz = result.evidence.get("fuzz")
            examples = fuzz.get("examples") if isinstance(fuzz, dict) else None
            if type(examples) is not int or examples < 1:
                lacking.append("its evidence names no example it explored (fuzz.examples)")
        elif not any(call.get("kind") in CALL_KINDS for call in result.calls):
            lacking.append("it lists no call of the runtime (calls of kind ok, fail or info)")
        if lacking:
            problems.append(
                f"scenarios/{index}: {result.entry.id} is {result.status}, but {' and '.join(lacking)}: "
                "a result that counts as met carries the evidence and the calls it was judged on"
            )
    return problems


def _reproduce_problems(document: dict[str, Any]) -> list[str]:
    """Each reproduce line re-runs its own scenario under the report's seed: a line
    that names another seed (a shard's, edited in) would reproduce another run."""
    import shlex

    problems = []
    for index, scenario in enumerate(document["scenarios"]):
        try:
            words = shlex.split(scenario["reproduce"])
        except ValueError as exc:
            problems.append(f"scenarios/{index}/reproduce: not a command line ({exc})")
            continue
        given = {word: words[at + 1] for at, word in enumerate(words[:-1]) if word in ("--only", "--seed")}
        expected = {"--only": scenario["id"], "--seed": str(document["seed"])}
        if given != expected:
            problems.append(
                f"scenarios/{index}/reproduce: gives {json.dumps(given)}, but the scenario and the report's seed are {json.dumps(expected)}"
            )
    return problems


def _count_problems(counts: dict[str, int], results: list[ScenarioResult]) -> list[str]:
    actual: dict[str, int] = {status: sum(result.status == status for result in results) for status in STATUSES}
    return [
        f"counts/{status}: says {counts.get(status, 0)}, but {actual.get(status, 0)} scenario(s) in the list are {status}"
        for status in sorted(set(counts) | set(actual), key=lambda s: (s not in STATUSES, s))
        if counts.get(status, 0) != actual.get(status, 0)
    ]


def _ids(items: Iterable[Any]) -> str:
    listed = [item["id"] if isinstance(item, dict) else item[0] if isinstance(item, tuple) else item for item in items]
    return ", ".join(listed) or "none"


def _verdict_problems(document: dict[str, Any], results: list[ScenarioResult]) -> list[str]:
    # The baseline's entries are exactly the scenarios marked xfail or xpass.
    verdict: Verdict = judge(
        results,
        {result.entry.id for result in results if result.baseline},
        document.get("black_box", False),
        document["capabilities"],
    )
    stated = document["verdict"]
    problems = [
        f"verdict/{key}: says {json.dumps(stated[key])}, but the scenario statuses give {json.dumps(getattr(verdict, key))}"
        for key in ("conformant", "complete", "exit_code", "headline")
        if key in stated and stated[key] != getattr(verdict, key)
    ]
    for key in ("blocking", "warnings", "not_covered", "needs_harness", "expected_failures", "stale_baseline"):
        if key in stated and _ids(stated[key]) != _ids(getattr(verdict, key)):
            problems.append(
                f"verdict/{key}: lists {_ids(stated[key])}, but the scenario statuses give {_ids(getattr(verdict, key))}"
            )
    if "tool_paths" in stated and stated["tool_paths"] != dict(verdict.tool_paths):
        problems.append(
            f"verdict/tool_paths: says {json.dumps(stated['tool_paths'])}, but the capabilities and the scenario "
            f"statuses give {json.dumps(dict(verdict.tool_paths))}"
        )
    derived = {answer.question: answer.answer for answer in verdict.checklist}
    for item in document["checklist"]:
        if item["id"] in derived and item["answer"] != derived[item["id"]]:
            problems.append(
                f"checklist/{item['id']}: answers {json.dumps(item['answer'])}, but its scenarios give {json.dumps(derived[item['id']])}"
            )
    return problems
