"""``retryproof replay FILE [--harness CMD | --binding FILE]``: re-run a FUZZ-MODEL history,
or a CRASH-POINTS or KILL-NEMESIS failure (a scenario replay: seed and environment).

The replay file holds the steps of a shrunk failing history. They run against the
harness (default: the bundled reference runtime, and only for a file whose run's target
was the bundled reference: replaying another runtime's history against the reference,
even one that forwarded the reference's hello, would quietly answer a different
question) on a fresh state directory, through the same driver and invariants as the
fuzz run, one line per step. Exit 1 when the
history still breaks an invariant (reproduced), 0 when it no longer does, 2 when the
file or the harness is unusable. A scenario replay re-runs its scenario with the
recorded seed and environment against the target it names (``--harness`` or
``--binding``, required: the recorded timings and points belong to that runtime), with
the same exit codes.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from typing import Any

from retryproof.adapters.connection import HarnessStartError
from retryproof.adapters.process_groups import Scratch
from retryproof.adapters.targets import target_of
from retryproof.conformance import replay_file
from retryproof.conformance.errors import KitError, load_user_file, strict_json
from retryproof.conformance.fuzz import (
    HarnessSilent,
    ModelViolation,
    StepError,
    run_steps,
    validate_steps,
)
from retryproof.spec.protocol import Hello

_FILE_HINT = "pass a file a FUZZ-MODEL, CRASH-POINTS or KILL-NEMESIS failure wrote (replays/ beside its report)"
_STEP_HINT = "a replay file holds the steps a FUZZ-MODEL failure wrote: restore that step, or take the file again from replays/ beside the report"


def load_replay(path: str) -> dict[str, Any]:
    """The replay document at ``path``, or a ``KitError`` saying what is wrong."""
    document = load_user_file(path, "replay file", strict_json, "JSON", _FILE_HINT)
    if not isinstance(document, dict) or document.get("format") != replay_file.FORMAT:
        raise KitError(f"{path} is not a replay file", f'expected an object with "format": "{replay_file.FORMAT}"')
    steps = document.get("steps")
    if not isinstance(steps, list):
        raise KitError(f"replay file {path} has no list of steps", 'expected "steps": [{"step": "submit", ...}, ...]')
    try:
        validate_steps(steps)
    except StepError as exc:
        raise KitError(f"replay file {path}: {exc}", _STEP_HINT) from None
    if not isinstance(document.get(replay_file.BUNDLED_REFERENCE, False), bool):
        raise KitError(f"replay file {path}: {replay_file.BUNDLED_REFERENCE} is not true or false", _FILE_HINT)
    return document


def main(args) -> int:
    recorded = load_user_file(args.file, "replay file", strict_json, "JSON", _FILE_HINT)
    if isinstance(recorded, dict) and recorded.get("format") == replay_file.SCENARIO_FORMAT:
        return _rerun_scenario(args, recorded)
    document = load_replay(args.file)
    behaviour = _behaviour(args, document)
    from retryproof.conformance.options import harness_target, load_binding, reference_shown

    binding = load_binding(args.binding) if getattr(args, "binding", None) else None
    if args.harness is None and binding is None and document.get(replay_file.BUNDLED_REFERENCE) is False:
        _refuse_on_reference(args.file, document)
    command, _ = harness_target(args.harness, None)
    print(
        f"replaying {len(document['steps'])} step(s) from {args.file} (seed {document.get('seed')}); recorded violation: {document.get('violation')}"
    )
    with Scratch("retryproof-replay-") as scratch:
        connection = target_of(command, binding, reference_shown(command)).connect(
            scratch, call_timeout=behaviour["call_timeout"], start_timeout=behaviour["start_timeout"]
        )
        try:
            hello = connection.start()
        except HarnessStartError as exc:
            raise KitError(
                f"the harness failed its handshake: {exc.message}",
                exc.stderr.strip()[-1000:] or "check the --harness command line",
            ) from None
        try:
            if args.harness is None:  # the name too: all that a file from an older kit says
                _recorded_from_reference(args.file, document, Hello.read(hello))
            violation, log = run_steps(connection, document["steps"], call_timeout=behaviour["call_timeout"])
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


def _recorded_from_reference(path: str, document: Mapping[str, Any], hello: Hello) -> None:
    """Without --harness the replay runs on the bundled reference: refuse a file that
    records another implementation (its name, when it records one, must match)."""
    recorded = document.get("implementation") or {}
    reference = hello.implementation
    if isinstance(recorded, Mapping) and recorded.get("name") and recorded.get("name") != reference.get("name"):
        _refuse_on_reference(path, document)


def _refuse_on_reference(path: str, document: Mapping[str, Any]) -> None:
    recorded = document.get("implementation") or {}
    name = json.dumps(recorded.get("name") if isinstance(recorded, Mapping) else None, ensure_ascii=False)[:200]
    raise KitError(
        f"{path} records a run of implementation {name} through another target than the bundled reference runtime",
        "replay it against that target: retryproof replay FILE --harness CMD (or --binding FILE)",
    )


def _behaviour(args, document: Mapping[str, Any]) -> dict[str, Any]:
    """The run's ``REPLAYED_OPTIONS`` as the file records them (a file from an older kit
    records none: the defaults), each overridden by the replay's own flag when given.
    A slow runtime's start (``--start-timeout 60``) would otherwise fail the replay."""
    from retryproof.conformance.options import REPLAYED_OPTIONS

    recorded = document.get("options", {})
    if not isinstance(recorded, dict):
        raise KitError(f"replay file {args.file}: its options are not an object", _FILE_HINT)
    behaviour = {}
    for option in REPLAYED_OPTIONS:
        given = getattr(args, option.dest, None)
        if given is not None:
            behaviour[option.dest] = given
            continue
        value = recorded.get(option.dest, option.default)
        try:  # checked as its flag would be: the file may have been edited
            behaviour[option.dest] = option.type(str(value))
        except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
            raise KitError(f"replay file {args.file}: options.{option.dest}: {exc}", _FILE_HINT) from None
    return behaviour


def _rerun_scenario(args, document: Mapping[str, Any]) -> int:
    """A scenario replay: ``retryproof run --only ID --seed N`` against the target, with
    the recorded environment (the crash point, the kill windows). Exit 1 when the
    scenario fails again (reproduced), 0 when it passes."""
    from retryproof.conformance.catalogue import catalogue
    from retryproof.conformance.cli import build_parser
    from retryproof.conformance.commands import run

    scenario, seed, env = document.get("scenario"), document.get("seed"), document.get("env")
    valid_env = isinstance(env, dict) and all(isinstance(value, str) for value in env.values())
    if scenario not in {item.id for item in catalogue()} or not isinstance(seed, int) or not valid_env:
        raise KitError(
            f"replay file {args.file} does not name a catalogue scenario, an integer seed and its environment",
            _FILE_HINT,
        )
    assert isinstance(env, dict)
    behaviour = _behaviour(args, document)
    if args.harness is None and args.binding is None:
        raise KitError(
            f"{args.file} replays a run of {json.dumps((document.get('implementation') or {}).get('name'))}",
            "name its target: retryproof replay FILE --harness CMD (or --binding FILE)",
        )
    target = ["--harness", args.harness] if args.harness is not None else ["--binding", args.binding]
    from retryproof.conformance.options import replayed_flags

    flags = replayed_flags(behaviour)
    print(
        f"replaying {scenario} with seed {seed}, {' '.join(flags)} and {' '.join(f'{k}={v}' for k, v in sorted(env.items()))}"
    )
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with Scratch("retryproof-replay-") as scratch:
            argv = ["run", "--only", scenario, "--seed", str(seed), *target, *flags, "--out", scratch.work]
            # The console says what the run found; its report goes with the scratch folder,
            # so no "wrote" line points at it (the file replayed is the run's record).
            code = run.main(build_parser("run").parse_args([*argv, "--format", "json"]), name_files=False)
    finally:  # a caller going on in this process (a test, the pytest plugin) gets its environment back
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    print("REPRODUCED" if code == 1 else "not reproduced: the scenario passed on this target")
    return code
