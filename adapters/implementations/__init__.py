"""Bundled implementations: idempotency libraries teams already run, each behind a
harness that only translates ``retryproof-harness/1`` into the library's own calls.

Each ``<name>/`` folder holds a ``setup`` script (the pinned library in the folder's own
virtual environment, plus any server it needs), the harness, and a README with every
mapping decision. This package holds only what their harnesses share: the
application side of a creation (``task_store``), which is not the library's business.
"""
