"""Restate as one runtime: the Restate server (the binary of the ``@restatedev/restate-server``
npm package) and the service of ``service.py`` under hypercorn, in this process.

Started by ``harness.py`` with ``RETRYPROOF_STATE_DIR``, ``RETRYPROOF_FAILPOINTS`` and
the ports in ``INGRESS_PORT``, ``ADMIN_PORT``, ``NODE_PORT``, ``SERVICE_PORT`` (fixed
per state directory: Restate records the node's address and the deployment's URI).
The server keeps all its data under ``<state dir>/restate`` and dies with this
process (``PR_SET_PDEATHSIG``), as this process dies with the harness: a SIGKILL of
the harness kills the whole runtime, and a restart finds Restate's durable state.

Once both listen, the deployment is registered with the admin API, as ``restate
deployments register`` does, unless an earlier start registered it. The harness waits
for the registration before it serves (``harness.py``), so no call meets a server
that does not know the service yet.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from hypercorn.asyncio import serve
from hypercorn.config import Config
from restate.server import install_shutdown_hook

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "node_modules", "@restatedev", "restate-server-linux-x64", "bin", "restate-server")
PR_SET_PDEATHSIG = 1
REGISTER_TIMEOUT_S = 30.0
#: How long the Restate server has to stop after SIGTERM before it is killed.
STOP_TIMEOUT_S = 10.0


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def start_server(state_dir: str) -> subprocess.Popen:
    environment = dict(
        os.environ,
        RESTATE_INGRESS__BIND_ADDRESS=f"127.0.0.1:{os.environ['INGRESS_PORT']}",
        RESTATE_ADMIN__BIND_ADDRESS=f"127.0.0.1:{os.environ['ADMIN_PORT']}",
        RESTATE_LOG_FILTER="warn",
        RESTATE_LOG_DISABLE_ANSI_CODES="true",
        # No outbound requests: the server otherwise reports to its vendor at start.
        RESTATE_DISABLE_TELEMETRY="true",
    )
    command = [SERVER, "--no-logo", "--base-dir", os.path.join(state_dir, "restate")]
    command += ["--listen-mode", "tcp", "--bind-ip", "127.0.0.1", "--bind-port", os.environ["NODE_PORT"]]
    # Two partitions instead of 24: a lighter server on a shared machine; one key's
    # invocations live in one partition either way.
    command += ["--default-num-partitions", "2"]
    return subprocess.Popen(
        command, env=environment, stdin=subprocess.DEVNULL, stdout=sys.stderr, preexec_fn=_die_with_parent
    )


def _admin(method: str, path: str, body: dict | None = None) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{os.environ['ADMIN_PORT']}{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def register() -> None:
    """Register the deployment once the admin API answers (bounded); an earlier start's
    registration stands (same URI), as it would for a restarted application."""
    deadline = time.monotonic() + REGISTER_TIMEOUT_S
    uri = f"http://127.0.0.1:{os.environ['SERVICE_PORT']}"
    while time.monotonic() < deadline:
        try:
            if _admin("GET", "/services/tasks") == 200:
                return
            if _admin("POST", "/deployments", {"uri": uri}) in (200, 201):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"restate serve: the deployment {uri} was not registered within {REGISTER_TIMEOUT_S:.0f}s")


def stop(server: subprocess.Popen) -> None:
    """A graceful stop is the Restate server's (SIGTERM, bounded); the service keeps no
    state of its own, so this process then simply ends."""
    server.terminate()
    try:
        server.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    os._exit(0)


async def main() -> None:
    sys.path.insert(0, HERE)
    from service import app  # after the path is set: this folder is not a package

    server = start_server(os.environ["RETRYPROOF_STATE_DIR"])
    # Through the SDK's hook: its ASGI app takes the loop's SIGTERM handler at its first
    # request and runs the hooks registered here.
    install_shutdown_hook(asyncio.get_running_loop(), lambda: stop(server))
    config = Config()
    config.bind = [f"127.0.0.1:{os.environ['SERVICE_PORT']}"]
    config.accesslog = None
    never = asyncio.Event()
    serving = asyncio.ensure_future(serve(app, config, shutdown_trigger=never.wait))  # type: ignore[arg-type]
    await asyncio.to_thread(register)
    # Serve until the Restate server ends (it never should on its own).
    while server.poll() is None and not serving.done():
        await asyncio.sleep(0.2)
    stop(server)


if __name__ == "__main__":
    asyncio.run(main())
