"""FUZZ-MODEL as a catalogue scenario: model-based exploration of one harness.

The run's seed drives Hypothesis (printed in the evidence, so ``--only FUZZ-MODEL
--seed N`` explores the same histories); the budget is the chosen profile of
``conformance.fuzz_profiles``. A failure is shrunk to a minimal history, saved as a
replay file under ``reports/replays/`` and kept whole in the evidence, and the reason
says how to re-run it with ``retryproof replay``.
"""

from __future__ import annotations

import json
import os

from conformance.fuzz_machine import run_fuzz
from conformance.scenarios import Context, scenario

#: Where replay files go, relative to the working directory of the run.
REPLAY_DIR = os.path.join("reports", "replays")


@scenario("FUZZ-MODEL")
def fuzz_model(ctx: Context) -> None:
    ctx.start()
    outcome = run_fuzz(ctx.conn, seed=ctx.seed)
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
    path = save_replay(document)
    flaky = " (Hypothesis saw it only on some runs of this history: timing-dependent)" if outcome.flaky else ""
    ctx.check(
        False,
        f"{outcome.violation}{flaky}; minimal history of {len(outcome.steps)} step(s) in {path}; "
        f"re-run it with: retryproof replay {path} --harness CMD",
    )


def save_replay(document: dict) -> str:
    """Write a replay file named after the implementation and seed; return its path."""
    name = str((document.get("implementation") or {}).get("name") or "harness")
    safe = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in name)
    os.makedirs(REPLAY_DIR, exist_ok=True)
    path = os.path.join(REPLAY_DIR, f"fuzz-model-{safe}-seed{document['seed']}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    return path
