"""The reference runtime: a retry-safe ``write_task`` that the kit certifies through
its harness (``python -m retryproof.reference_impl``) exactly like any third-party runtime.

It knows the contract (``spec``) and never the kit. ``Runtime`` serves in-process use.
"""

from retryproof.reference_impl.runtime import WRITE_TASK_FAILPOINTS, Runtime

__all__ = ["WRITE_TASK_FAILPOINTS", "Runtime"]
