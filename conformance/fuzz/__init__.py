"""FUZZ-MODEL's engine: model-based exploration of one harness with Hypothesis.

``model`` runs steps against a harness and checks each against an in-memory model;
``machine`` lets Hypothesis choose the steps and shrink a failure; ``profiles`` holds
the example budgets. The scenario (``scenarios.fuzz_model``) and ``retryproof replay``
use only what is exported here.
"""

from retryproof.conformance.fuzz.machine import FuzzOutcome, run_fuzz
from retryproof.conformance.fuzz.model import (
    HarnessSilent,
    ModelViolation,
    StepError,
    run_steps,
    validate_steps,
)
from retryproof.conformance.fuzz.profiles import ENV_VAR, private_storage, shard_share

__all__ = [
    "ENV_VAR",
    "FuzzOutcome",
    "HarnessSilent",
    "ModelViolation",
    "StepError",
    "private_storage",
    "run_fuzz",
    "run_steps",
    "shard_share",
    "validate_steps",
]
