"""FUZZ-MODEL as a catalogue scenario: model-based exploration of one harness.

The run's seed drives Hypothesis (printed in the evidence, so ``--only FUZZ-MODEL
--seed N`` explores the same histories); the budget is the chosen profile of
``retryproof.conformance.fuzz.profiles``. A failure is shrunk to a minimal history kept whole in
the evidence (``replay``); the report writers save it beside the report as
``replays/<file>`` (``retryproof.conformance.replay_file``), and the reason says how to re-run it with
``retryproof replay``.
"""

from __future__ import annotations

from retryproof.conformance import replay_file
from retryproof.conformance.context import ScenarioFailed, Unjudgeable
from retryproof.conformance.scenarios import Context, scenario


@scenario("FUZZ-MODEL", long=20)
def fuzz_model(ctx: Context) -> None:
    # Imported here: Hypothesis costs more to import than the rest of the kit, and
    # ``retryproof list`` (which imports every scenario module) never explores.
    from retryproof.conformance.fuzz import (
        ENV_VAR,
        HarnessSilent,
        ModelViolation,
        private_storage,
        run_fuzz,
        shard_share,
    )

    seed, max_examples = ctx.seed, None
    if ctx.shard is not None:
        seed, max_examples = shard_share(ctx.seed, ctx.shard.index, ctx.shard.count)
    ctx.start()
    try:
        with private_storage():
            outcome = run_fuzz(
                ctx.conn,
                seed=seed,
                call_timeout=ctx.call_timeout,
                max_examples=max_examples,
                probe_width=ctx.concurrency,
            )
    except HarnessSilent as exc:
        raise Unjudgeable(f"FUZZ-MODEL stopped: {exc}") from None
    except ModelViolation as exc:
        # Broken before any step ran (the opening list_tasks): no history to shrink,
        # but a broken contract all the same, judged as every other scenario judges it.
        raise ScenarioFailed(str(exc)) from None
    ctx.reproduce_env[ENV_VAR] = outcome.profile
    ctx.note(
        "fuzz",
        {
            "seed": outcome.seed,
            "profile": outcome.profile,
            "shard": None if ctx.shard is None else str(ctx.shard),
            "probe": outcome.probe,
            "examples": outcome.examples,
            # of which this many drew a history already run, and were not run again
            "repeated": outcome.repeated,
            "seconds": round(outcome.seconds, 2),
            "seconds_to_first_failure": None
            if outcome.seconds_to_first_failure is None
            else round(outcome.seconds_to_first_failure, 2),
        },
    )
    if not outcome.failed:
        return
    # The failure answers no to the questions its minimal history exercises, not to
    # every question FUZZ-MODEL can touch (verdict.answer_checklist reads this).
    ctx.note("checklist_questions", list(outcome.questions))
    document = outcome.replay_document(ctx.hello.implementation)
    ctx.note("replay", document)
    # The report's calls (and timeline) are the minimal history's last replay: exploring
    # made thousands of calls, which no report lists.
    ctx.adopt(outcome.history, outcome.history_began)
    ctx.note("minimal_history", outcome.log)
    path = f"replays/{replay_file.file_name(document)}"
    flaky = " (Hypothesis saw it only on some runs of this history: timing-dependent)" if outcome.flaky else ""
    ctx.check(
        False,
        f"{outcome.violation}{flaky}; minimal history of {len(outcome.steps)} step(s) saved beside the report as {path}; "
        f"re-run it with: retryproof replay <report dir>/{path} and the reproduce line's --harness or --binding",
    )
