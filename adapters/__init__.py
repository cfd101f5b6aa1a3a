"""How the kit reaches a runtime: one ``Connection`` interface for every way in.

A scenario never learns how the runtime is reached. It holds a ``Connection`` and
starts, calls, kills, restarts and stops it. A run gets its connections from one
``retryproof.adapters.targets.Target``, and ``Target.connect`` is the only way in:

- ``HarnessTarget``: ``retryproof.adapters.process.ProcessConnection`` runs any harness
  command line that speaks ``retryproof-harness/1`` on stdin/stdout (any language);
  ``retryproof.adapters.python_host`` hosts a vendor's Python runtime class in a
  subprocess that serves the same protocol, so kill and restart stay real OS events;
- ``BindingTarget``: ``retryproof.adapters.binding.BindingConnection`` reaches an MCP
  server or an HTTP API as it is, through a binding file that maps its call, answers and
  listing onto the protocol's ops, over one of ``binding/transports/``'s wires.

Both start their processes through ``retryproof.adapters.process_groups``.
"""

from retryproof.adapters.connection import Connection, HarnessStartError, Lost, Reply

__all__ = ["Connection", "HarnessStartError", "Lost", "Reply"]
