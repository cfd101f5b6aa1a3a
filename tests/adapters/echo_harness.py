"""A tiny harness for adapter tests: ``echo`` (after ``delay`` seconds), ``shout``
(writes a line of ``size`` bytes), ``stderr`` (writes ``size`` bytes to stderr),
``escape`` (leaves a double-forked ``setsid`` process holding stdout and stderr, out
of the kit's process group, and answers its pid), ``noise`` (writes ``count`` lines
that answer nothing, then nothing more)."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))
import kit_from_source  # noqa: E402, F401  (the kit's modules, under python -S too)

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


def escape(args):
    reader, writer = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(writer, str(os.getpid()).encode())
            time.sleep(args.get("seconds", 60))
        os._exit(0)
    return {"pid": int(os.read(reader, 32))}


def noise(args):
    for number in range(args["count"]):
        sys.stdout.buffer.write(b'{"id": %d, "ok": true, "result": {}}\n' % (10**6 + number))
    sys.stdout.buffer.flush()
    time.sleep(60)


serve(
    {
        "hello": lambda args: {"protocol": PROTOCOL},
        "echo": echo,
        "shout": shout,
        "stderr": stderr,
        "escape": escape,
        "noise": noise,
    }
)
