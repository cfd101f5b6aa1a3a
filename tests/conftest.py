"""Shared test configuration: the FUZZ-MODEL Hypothesis profiles, and the ``strace``
fixture of the DURABILITY-TRACE tests.

The profiles are registered here so ``pytest --hypothesis-profile retryproof-nightly``
can select one. Nothing is loaded globally: Hypothesis loads its own ``ci`` profile
when it detects CI, and the fuzz tests take their budget from
``retryproof.conformance.fuzz.profiles.fuzz_settings()``, which inherits from that profile
instead of replacing it.
"""

import os
import shutil
import subprocess

import pytest

from retryproof.conformance.fuzz.profiles import register_profiles

register_profiles()


@pytest.fixture(scope="session")
def strace() -> str:
    """The strace binary, when it is installed and may trace here; the test is skipped
    otherwise. Installed is not enough: a container without ptrace rights has the
    binary, and DURABILITY-TRACE then skips, which a test expecting a verdict would
    misread."""
    binary = shutil.which("strace")
    if binary is None:
        pytest.skip("strace is not installed")
    done = subprocess.run([binary, "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[-200:]}")
    return binary
