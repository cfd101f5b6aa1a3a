"""A tiny harness for adapter tests: ``echo`` (after ``delay`` seconds), ``shout``
(writes a line of ``size`` bytes), ``stderr`` (writes ``size`` bytes to stderr)."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from retryproof.spec.protocol import PROTOCOL, serve  # noqa: E402


def echo(args):
    time.sleep(args.get("delay", 0))
    return {
        "value": args.get("value"),
        "state_dir": os.environ["RETRYPROOF_STATE_DIR"],
        "failpoints": os.environ.get("RETRYPROOF_FAILPOINTS"),
    }


def shout(args):
    sys.stdout.buffer.write(b"x" * args["size"])
    sys.stdout.flush()
    return {}


def stderr(args):
    sys.stderr.write("e" * args["size"] + "\n")
    sys.stderr.flush()
    return {}


serve({"hello": lambda args: {"protocol": PROTOCOL}, "echo": echo, "shout": shout, "stderr": stderr})
