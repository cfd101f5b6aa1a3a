"""Shared test configuration: the FUZZ-MODEL Hypothesis profiles.

The profiles are registered here so ``pytest --hypothesis-profile retryproof-nightly``
can select one. Nothing is loaded globally: Hypothesis loads its own ``ci`` profile
when it detects CI, and the fuzz tests take their budget from
``retryproof.conformance.fuzz.profiles.fuzz_settings()``, which inherits from that profile
instead of replacing it.
"""

from retryproof.conformance.fuzz.profiles import register_profiles

register_profiles()
