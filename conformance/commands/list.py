"""``retryproof list``: the scenario catalogue, and which scenarios this kit implements;
with ``--binding FILE``, which of them apply to the tool that binding describes, and why
the others do not."""

from __future__ import annotations

from tabulate import tabulate

from retryproof.conformance.catalogue import catalogue
from retryproof.conformance.scenarios import registry

#: Why a binding does not meet a need, by the need's kind (``protocol:framing`` -> protocol).
WHY_NOT = {
    "failpoint": "a binding has no failpoints (KILL-NEMESIS stands in for them)",
    "tamper": "a binding has no test hooks to tamper with state",
    "diagnose": "a binding has no receipt diagnostics",
    "write_report": "a binding certifies one tool path, not write_report",
    "approval": "a binding certifies one tool path, not approval flows",
    "legacy": "the binding does not offer legacy (offers:)",
    "multiprocess": "the binding does not offer multiprocess (offers:)",
    "protocol:write-task-v1": "the binding does not claim write-task-v1 (claims:), so the service compares its own bytes",
    "protocol": "a binding cannot send raw lines, exact JSON text or invocation data",
    "tool": "not on PATH",
}

#: Scenarios whose needs a binding meets but that skip themselves over one, and why.
SKIPPED_AT_RUN_TIME = {"DURABILITY-TRACE": "it traces a harness command line; a bound server is not traced"}


def main(args) -> int:
    implemented = registry()
    if getattr(args, "binding", None):
        return _for_binding(args.binding, implemented)
    rows = [
        (
            item.id,
            item.level,
            ", ".join(item.checks),
            ", ".join(item.checklist),
            ", ".join(item.needs),
            "yes" if item.id in implemented else "NO",
            item.title,
        )
        for item in catalogue()
    ]
    print(
        tabulate(rows, headers=("id", "level", "checks", "answers", "needs", "implemented", "title"), tablefmt="github")
    )
    return 0


def _for_binding(path: str, implemented) -> int:
    from retryproof.conformance.options import load_binding
    from retryproof.conformance.runner import missing_needs
    from retryproof.spec.digest import TASK_FIELDS
    from retryproof.spec.protocol import Hello

    binding = load_binding(path)
    model = binding.task_model
    absent = [name for name in TASK_FIELDS if name not in model]
    print(f"binding {binding.name} ({binding.target})")
    print(
        f"task model: {', '.join(model)}: every scenario sends, expects (their write-task-v1 digest) and compares "
        "only these"
        + (f"; {', '.join(absent)} are never sent (write-task-v1 reads them as null or [])" if absent else "")
    )
    if binding.constants:
        print(f"constants sent with every call: {', '.join(binding.constants)}")
    print(
        "reuse: said by the answer (a rule means reused)"
        if binding.says_reused
        else "reuse: judged by the listing (no rule means reused): an answer naming an effect listed before the "
        "call is reused, a new one created; each such answer is marked in the report's evidence (exchanges: judged_by_listing)"
    )
    hello = Hello.read({"capabilities": list(binding.capabilities), "failpoints": []})
    rows = []
    for item in catalogue():
        missing = missing_needs(item, hello, binding)
        if item.id not in implemented:
            applies, why = "no", "not implemented in this version of the kit"
        elif missing:
            applies, why = "no", "; ".join(f"{need}: {_why_not(need)}" for need in missing)
        elif item.id in SKIPPED_AT_RUN_TIME:
            applies, why = "no", SKIPPED_AT_RUN_TIME[item.id]
        else:
            applies, why = "yes", _how(item.id, binding)
        rows.append((item.id, item.level, applies, why))
    print(tabulate(rows, headers=("id", "level", "applies", "why"), tablefmt="github"))
    return 0


def _why_not(need: str) -> str:
    return WHY_NOT.get(need) or WHY_NOT.get(need.partition(":")[0], "the binding does not provide it")


def _how(scenario_id: str, binding) -> str:
    """What an applicable scenario does with this tool's shape, where the shape matters."""
    if scenario_id == "CONFLICT-DIGEST":
        return "the conflicting request changes one of the tool's fields"
    if scenario_id == "NORMALIZED-EQUAL":
        return "varies the tool's fields only; a kind that changes nothing there is named in the evidence (not_varied)"
    if scenario_id == "FUZZ-MODEL":
        return (
            "tasks of the tool's fields; every normalized-equal variant"
            if binding.normalizes
            else "tasks of the tool's fields; key order only (no write-task-v1 claim), in_flight retried"
        )
    if scenario_id == "A4-CONCURRENT" and not binding.says_reused:
        return "created and reused told apart by the listing"
    return ""
