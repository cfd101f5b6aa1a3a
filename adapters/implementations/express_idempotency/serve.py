"""The app of ``server.js`` as ``binding.yaml`` starts it: the Express app, its Redis
keys under this state directory's name (``../namespace.py``, the harness's too), so
that the scenarios sharing the Redis server of ``./setup start`` stay apart and a
restart on the same state directory finds its keys again.

The process becomes node (``exec``): the kit's SIGKILL of the server is a SIGKILL of the app.
"""

from __future__ import annotations

import os

from retryproof.adapters.implementations.namespace import state_namespace

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    namespace = state_namespace(os.environ["RETRYPROOF_STATE_DIR"])
    os.execvpe("node", ["node", os.path.join(HERE, "server.js")], dict(os.environ, REDIS_NAMESPACE=namespace))


if __name__ == "__main__":
    main()
