"""A name of one state directory, for keys on a server that outlives it.

The kit gives every scenario a fresh state directory, but a Redis server started by
an implementation's setup serves the whole matrix; keys prefixed with this name keep
one scenario's records out of another's. The name is created once, atomically (a
link, so that processes starting together agree), made durable, and read back.
"""

from __future__ import annotations

import os
import tempfile
import uuid


def state_namespace(state_dir: str) -> str:
    path = os.path.join(state_dir, "server-namespace")
    fd, temp = tempfile.mkstemp(dir=state_dir, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write("retryproof-" + uuid.uuid4().hex)
    try:
        os.link(temp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(temp)
        directory = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    with open(path) as handle:
        return handle.read()
