"""What the approval service declares, apart from the service itself: its capability,
its failpoints and the ops it serves.

The harness answers ``hello`` and builds its op table from these names without
importing the service (``harness.approval_ops``), which is loaded on the first
approval call; ``ApprovalService.handlers`` must serve exactly ``OPS``, which the
harness checks when it loads the service.
"""

CAPABILITY = "approval"
# Each takes crash (SIGKILL on reaching the point) or fail (the step's I/O fails).
FAILPOINTS = ("approval.audit_approved", "approval.audit_started", "approval.after_effect", "approval.audit_completed")
OPS = ("propose", "approve", "execute", "recover", "get_operation", "list_effects", "list_audit")
