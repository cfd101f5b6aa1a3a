"""``python -m retryproof.reference_impl``: serve ``retryproof-harness/1`` on stdin/stdout,
or the same runtime as an HTTP API (``--http``) or an MCP server (``--mcp stdio|http``),
which listen on 127.0.0.1 at ``RETRYPROOF_PORT`` and are certified through the
bindings in ``retryproof.adapters.bindings``.

Environment: ``RETRYPROOF_STATE_DIR`` (required, an existing directory) and
``RETRYPROOF_FAILPOINTS`` (optional, ``name=crash|fail,...``). ``--fault NAME`` serves a
bundled one-defect variant instead: ``retryproof.reference_impl.faulty.VARIANTS`` names
each one, and ``variant(NAME)`` loads its ``Runtime`` subclass. A start-up problem is one
line on stderr and exit status 2.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from retryproof.reference_impl.harness import build_handlers, op_groups
from retryproof.reference_impl.runtime import WAIT_TIMEOUT_S, Runtime
from retryproof.spec.protocol import parse_failpoints, serve

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    import argparse


class StartupError(Exception):
    """Why the harness cannot start; printed as one line."""


def _runtime_class(fault: str | None) -> type[Runtime]:
    if fault is None:
        return Runtime
    try:
        import retryproof.reference_impl.faulty as faulty
    except ModuleNotFoundError as exc:
        if exc.name != "retryproof.reference_impl.faulty":
            raise
        raise StartupError(
            "--fault needs retryproof.reference_impl.faulty, which this build does not include"
        ) from None
    variants = getattr(faulty, "VARIANTS", {})
    if fault not in variants:
        raise StartupError(f"unknown fault {fault!r}; known: {', '.join(sorted(variants)) or 'none'}")
    return faulty.variant(fault)


def _state_dir() -> str:
    state_dir = os.environ.get("RETRYPROOF_STATE_DIR")
    if not state_dir:
        raise StartupError("RETRYPROOF_STATE_DIR is not set; it must name an existing directory")
    if not os.path.isdir(state_dir):
        raise StartupError(f"RETRYPROOF_STATE_DIR={state_dir!r} is not an existing directory")
    return state_dir


def _port() -> int:
    text = os.environ.get("RETRYPROOF_PORT", "")
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise StartupError(f"RETRYPROOF_PORT={text!r} is not a port number")
    return int(text)


def _options(argv: list[str]) -> argparse.Namespace | SimpleNamespace:
    """The command line. The forms the kit starts hundreds of times a run skip argparse
    (building a parser loads gettext, locale and shutil; benchmarks/bench_start.py
    measures the start): the plain harness, with no arguments; a faulty one, ``--fault
    NAME`` (as the selftest starts it); and either one as an HTTP API, ``--http`` last."""
    http = argv[-1:] == ["--http"]
    rest = argv[:-1] if http else argv
    if not rest or (len(rest) == 2 and rest[0] == "--fault" and not rest[1].startswith("-")):
        return SimpleNamespace(fault=rest[1] if rest else None, wait_timeout=WAIT_TIMEOUT_S, http=http, mcp=None)
    return _parser().parse_args(argv)


def _parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m retryproof.reference_impl", description=__doc__.splitlines()[0])
    parser.add_argument("--fault", metavar="NAME", help="serve the bundled faulty variant NAME")
    parser.add_argument(
        "--wait-timeout",
        type=float,
        default=WAIT_TIMEOUT_S,
        metavar="S",
        help="seconds a call waits for another holder of its id before in_progress (default %(default)s, below the kit's call timeout)",
    )
    served_as = parser.add_mutually_exclusive_group()
    served_as.add_argument("--http", action="store_true", help="serve an HTTP API with Idempotency-Key semantics")
    served_as.add_argument(
        "--mcp", choices=("stdio", "http"), help="serve an MCP server (official mcp SDK) over stdio or streamable HTTP"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    options = _options(sys.argv[1:] if argv is None else argv)
    try:
        runtime_class = _runtime_class(options.fault)
        state_dir = _state_dir()
        try:
            failpoints = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
        except ValueError as exc:
            raise StartupError(f"RETRYPROOF_FAILPOINTS: {exc}") from None
        runtime = runtime_class(state_dir, failpoints, wait_timeout_s=options.wait_timeout)
        groups = op_groups(runtime)
        unknown = set(failpoints) - {name for group in groups for name in group.failpoints}
        if unknown:
            raise StartupError(
                f"RETRYPROOF_FAILPOINTS names failpoints this harness lacks: {', '.join(sorted(unknown))}"
            )
        port = _port() if options.http or options.mcp == "http" else None
    except (StartupError, OSError) as exc:
        print(f"reference_impl: {exc}", file=sys.stderr)
        return 2
    implementation = "reference" if options.fault is None else f"reference-fault-{options.fault}"
    if options.http:
        from retryproof.reference_impl import http_service

        http_service.serve(runtime, port or 0)
    elif options.mcp:
        from retryproof.reference_impl import mcp_server

        try:
            mcp_server.serve(runtime, options.mcp, port, implementation)
        except ModuleNotFoundError as exc:
            print(f"reference_impl: --mcp needs the mcp SDK ({exc}); pip install 'retryproof[mcp]'", file=sys.stderr)
            return 2
    else:
        serve(build_handlers(groups, implementation))
    return 0


if __name__ == "__main__":
    sys.exit(main())
