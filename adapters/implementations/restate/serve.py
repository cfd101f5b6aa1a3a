"""Restate as one runtime: the Restate server (the binary of the ``@restatedev/restate-server``
npm package) and the service of ``service.py`` under hypercorn, in this process.

Started with ``RETRYPROOF_STATE_DIR`` by ``harness.py`` (which also passes
``RETRYPROOF_FAILPOINTS`` and the ingress port in ``INGRESS_PORT``) or by the kit
through ``binding.yaml`` (the ingress port in ``RETRYPROOF_PORT``). The other ports are
drawn at the first start in a state directory and kept (``ports``): Restate records
its node's address and the deployment's URI. The server keeps all its data under
``<state dir>/restate`` and dies with this process (``PR_SET_PDEATHSIG``); a SIGKILL of
the runtime's process group kills all of it, and a restart finds Restate's state.

The deployment is registered with the admin API, as ``restate deployments register``
does, unless an earlier start registered it. At a state directory's first start the
server runs once without its HTTP ingress for that (``--roles`` without
``http-ingress``), then again with it: the ingress port is what tells a caller (the
harness, or the kit through the binding) that the runtime is ready, so it must not
accept before the server knows the service.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from hypercorn.asyncio import serve
from hypercorn.config import Config
from restate.server import install_shutdown_hook

from retryproof.adapters.loopback import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "node_modules", "@restatedev", "restate-server-linux-x64", "bin", "restate-server")
PR_SET_PDEATHSIG = 1
REGISTER_TIMEOUT_S = 30.0
#: How long the Restate server has to stop after SIGTERM before it is killed.
STOP_TIMEOUT_S = 10.0
PORTS = ("ADMIN_PORT", "NODE_PORT", "SERVICE_PORT", "INGRESS_PORT")
#: Every role but the HTTP ingress: the first start's registration run.
WITHOUT_INGRESS = "worker,admin,log-server,metadata-server"


def _durably(path: str, text: str) -> None:
    folder = os.path.dirname(path)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def ports(state_dir: str) -> dict[str, str]:
    """The runtime's ports, drawn at the first start in a state directory and kept."""
    path = os.path.join(state_dir, "restate-ports.json")
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        pass
    chosen = {name: str(free_port()) for name in PORTS}
    _durably(path, json.dumps(chosen))
    return chosen


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def start_server(state_dir: str, roles: str | None = None) -> subprocess.Popen:
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
    if roles is not None:
        command += ["--roles", roles]
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


def end(server: subprocess.Popen) -> None:
    """Stop the Restate server gracefully (SIGTERM), bounded."""
    server.terminate()
    try:
        server.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def stop(server: subprocess.Popen) -> None:
    """A graceful stop is the Restate server's; the service keeps no state of its own,
    so this process then simply ends."""
    end(server)
    os._exit(0)


async def main() -> None:
    sys.path.insert(0, HERE)
    from service import app  # after the path is set: this folder is not a package

    state_dir = os.environ["RETRYPROOF_STATE_DIR"]
    kept = ports(state_dir)
    os.environ.update({name: kept[name] for name in PORTS if name != "INGRESS_PORT"})
    os.environ.setdefault("INGRESS_PORT", os.environ.get("RETRYPROOF_PORT") or kept["INGRESS_PORT"])
    config = Config()
    config.bind = [f"127.0.0.1:{os.environ['SERVICE_PORT']}"]
    config.accesslog = None
    never = asyncio.Event()
    serving = asyncio.ensure_future(serve(app, config, shutdown_trigger=never.wait))  # type: ignore[arg-type]
    # Through the SDK's hook: its ASGI app takes the loop's SIGTERM handler at its first
    # request and runs the hooks registered here; a stop ends the server running then.
    running: list[subprocess.Popen] = []
    install_shutdown_hook(asyncio.get_running_loop(), lambda: stop(running[-1]) if running else os._exit(0))
    registered = os.path.join(state_dir, "restate-registered")
    if not os.path.exists(registered):
        running.append(start_server(state_dir, WITHOUT_INGRESS))
        try:
            await asyncio.to_thread(register)
        finally:
            await asyncio.to_thread(end, running.pop())
        _durably(registered, "")
    server = start_server(state_dir)
    running.append(server)
    # Serve until the Restate server ends (it never should on its own).
    while server.poll() is None and not serving.done():
        await asyncio.sleep(0.2)
    stop(server)


if __name__ == "__main__":
    asyncio.run(main())
