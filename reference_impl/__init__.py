"""The reference runtime: a retry-safe ``write_task`` that the kit certifies through
its harness (``python -m retryproof.reference_impl``) exactly like any third-party runtime.

It knows the contract (``spec``) and never the kit. ``Runtime`` serves in-process use.
"""

from retryproof.reference_impl.runtime import WRITE_TASK_FAILPOINTS, Runtime

__all__ = ["WRITE_TASK_FAILPOINTS", "Runtime", "__version__"]

#: The release this runtime ships in (its ``hello`` says so). A constant rather than an
#: ``importlib.metadata`` lookup, which would weigh on every harness start;
#: a test holds it equal to the installed distribution's version.
__version__ = "0.1.0"
