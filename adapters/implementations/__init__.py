"""Bundled implementations: idempotency libraries and human-approval flows teams already
run, each behind a harness that only translates ``retryproof-harness/1`` into the
library's own calls.

Each ``<name>/`` folder holds a ``setup`` script (the pinned library in the folder's own
virtual environment, plus any server it needs), the harness, and a README with every
mapping decision. This package holds only what their harnesses share: the
application side of a creation (``task_store``) and of an approved operation
(``approval_effects``), which are not the library's business, and the version a
``hello`` names (``versions``: the library's, then the rest of its stack's).
"""
