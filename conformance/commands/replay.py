"""``retryproof replay FILE [--harness CMD]``: re-run a FUZZ-MODEL history.

The replay file holds the steps of a shrunk failing history. They run against the
harness (default: the bundled reference runtime) on a fresh state directory, through
the same driver and invariants as the fuzz run, one line per step. Exit 1 when the
history still breaks an invariant (reproduced), 0 when it no longer does, 2 when the
file or the harness is unusable.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from retryproof.adapters.connection import HarnessStartError
from retryproof.adapters.process import ProcessConnection
from retryproof.conformance import replay_file
from retryproof.conformance.errors import KitError, load_user_file
from retryproof.conformance.fuzz import (
    HarnessSilent,
    ModelViolation,
    StepError,
    run_steps,
    validate_steps,
)

_STEP_HINT = "a replay file holds the steps a FUZZ-MODEL failure wrote: restore that step, or take the file again from replays/ beside the report"


def load_replay(path: str) -> dict[str, Any]:
    """The replay document at ``path``, or a ``KitError`` saying what is wrong."""
    document = load_user_file(
        path, "replay file", json.load, "JSON", "pass the file a FUZZ-MODEL failure wrote (replays/ beside its report)"
    )
    if not isinstance(document, dict) or document.get("format") != replay_file.FORMAT:
        raise KitError(f"{path} is not a replay file", f'expected an object with "format": "{replay_file.FORMAT}"')
    steps = document.get("steps")
    if not isinstance(steps, list):
        raise KitError(f"replay file {path} has no list of steps", 'expected "steps": [{"step": "submit", ...}, ...]')
    try:
        validate_steps(steps)
    except StepError as exc:
        raise KitError(f"replay file {path}: {exc}", _STEP_HINT) from None
    return document


def main(args) -> int:
    document = load_replay(args.file)
    from retryproof.conformance.options import harness_target

    command, _ = harness_target(args.harness, None)
    print(
        f"replaying {len(document['steps'])} step(s) from {args.file} (seed {document.get('seed')}); recorded violation: {document.get('violation')}"
    )
    with tempfile.TemporaryDirectory(prefix="retryproof-replay-") as state_dir:
        connection = ProcessConnection(command, state_dir)
        try:
            connection.start()
        except HarnessStartError as exc:
            raise KitError(
                f"the harness failed its handshake: {exc.message}",
                exc.stderr.strip()[-1000:] or "check the --harness command line",
            ) from None
        try:
            violation, log = run_steps(connection, document["steps"])
        except StepError as exc:  # raised before any step: one this harness cannot take
            raise KitError(
                f"replay file {args.file}: {exc}", "replay it against a harness that declares what the history uses"
            ) from None
        except ModelViolation as exc:  # raised while setting up, before any step
            violation, log = exc, []
        except HarnessSilent as exc:
            raise KitError(
                f"the harness stopped answering, so the replay judges nothing: {exc}",
                "check the harness's stderr; raise --call-timeout if it is slow",
            ) from None
        finally:
            connection.kill()
    for line in log:
        print(f"  {line}")
    if violation:
        print(f"REPRODUCED: {violation}")
        return 1
    print("not reproduced: every invariant held on this harness")
    return 0
