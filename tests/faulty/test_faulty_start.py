"""What a faulty harness loads to answer ``hello``: properties, not timings.

The selftest starts faulty harnesses about a hundred and forty times, so a start that
imported every variant (the approval service among them), argparse and typing paid
for it at each; ``benchmarks/bench_start.py`` measures the start itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retryproof.conformance.options import REFERENCE_COMMAND
from retryproof.reference_impl.faulty import VARIANTS, describe, killed_by, variant
from retryproof.reference_impl.runtime import Runtime

HELLO = json.dumps({"id": 1, "op": "hello", "args": {"protocol": "retryproof-harness/1"}}) + "\n"


def imported_by(name: str, state_dir) -> tuple[dict, set[str]]:
    """The hello of ``--fault name`` served by the harness's ``main``, and the modules
    loaded once it answered."""
    code = (
        "import json, sys\n"
        "from retryproof.reference_impl.__main__ import main\n"
        f"assert main(['--fault', {name!r}]) == 0\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=HELLO,
        capture_output=True,
        text=True,
        env={**os.environ, "RETRYPROOF_STATE_DIR": str(state_dir)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), set(json.loads(done.stderr.splitlines()[-1]))


# p3-audit-reclassifies subclasses the approval service, which imports typing.
@pytest.mark.parametrize(
    ("name", "unused"), [("no-idempotency", {"argparse", "typing"}), ("p3-audit-reclassifies", {"argparse"})]
)
def test_a_faulty_harness_imports_its_own_variant_only(name, unused, tmp_path):
    hello, imported = imported_by(name, tmp_path)
    assert hello["result"]["implementation"]["name"] == f"reference-fault-{name}"
    variants = {f"retryproof.reference_impl.faulty.{module}" for module, _ in VARIANTS.values()}
    assert imported & variants == {f"retryproof.reference_impl.faulty.{VARIANTS[name][0]}"}
    assert not imported & unused


def test_each_name_loads_a_runtime_with_its_defect_and_killers():
    for name in VARIANTS:
        loaded = variant(name)
        assert issubclass(loaded, Runtime) and loaded is not Runtime
        assert describe(name) and killed_by(name) == loaded.killed_by


def test_an_unknown_fault_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(
        [*REFERENCE_COMMAND, "--fault", "no-such-defect"],
        input=HELLO,
        capture_output=True,
        text=True,
        env={**os.environ, "RETRYPROOF_STATE_DIR": str(tmp_path)},
        timeout=60,
    )
    assert (done.returncode, done.stdout, len(done.stderr.splitlines())) == (2, "", 1)
    assert "unknown fault 'no-such-defect'" in done.stderr and "no-idempotency" in done.stderr
