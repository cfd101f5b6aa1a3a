"""FUZZ-MODEL as a catalogue scenario: model-based exploration of one harness.

The run's seed drives Hypothesis (printed in the evidence, so ``--only FUZZ-MODEL
--seed N`` explores the same histories); the budget is the chosen profile of
``conformance.fuzz_profiles``. A failure is shrunk to a minimal history kept whole in
the evidence (``replay``); the report writers save it beside the report as
``replays/<file>`` (``replay_file_name``), and the reason says how to re-run it with
``retryproof replay``.
"""

from __future__ import annotations

from conformance.context import Unjudgeable
from conformance.fuzz_machine import run_fuzz
from conformance.fuzz_model import HarnessSilent
from conformance.fuzz_profiles import ENV_VAR, private_storage
from conformance.scenarios import Context, scenario


@scenario("FUZZ-MODEL")
def fuzz_model(ctx: Context) -> None:
    ctx.start()
    try:
        with private_storage():
            outcome = run_fuzz(ctx.conn, seed=ctx.seed, call_timeout=ctx.call_timeout)
    except HarnessSilent as exc:
        raise Unjudgeable(f"FUZZ-MODEL stopped: {exc}") from None
    ctx.reproduce_env[ENV_VAR] = outcome.profile
    ctx.note(
        "fuzz",
        {
            "seed": outcome.seed,
            "profile": outcome.profile,
            "examples": outcome.examples,
            "seconds": round(outcome.seconds, 2),
            "seconds_to_first_failure": None if outcome.seconds_to_first_failure is None else round(outcome.seconds_to_first_failure, 2),
        },
    )
    if not outcome.failed:
        return
    document = outcome.replay_document(ctx.hello.get("implementation"))
    ctx.note("replay", document)
    ctx.note("minimal_history", outcome.log)
    path = f"replays/{replay_file_name(document)}"
    flaky = " (Hypothesis saw it only on some runs of this history: timing-dependent)" if outcome.flaky else ""
    ctx.check(
        False,
        f"{outcome.violation}{flaky}; minimal history of {len(outcome.steps)} step(s) saved beside the report as {path}; "
        f"re-run it with: retryproof replay <report dir>/{path} --harness CMD",
    )


def replay_file_name(document: dict) -> str:
    """The file name of a replay: the implementation and the seed, file-name-safe."""
    name = str((document.get("implementation") or {}).get("name") or "harness")
    safe = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in name)
    return f"fuzz-model-{safe}-seed{document['seed']}.json"
