"""What the kit's own commands load before they answer: properties, not timings
(``benchmarks/bench_start.py`` measures the figures). A parser and a signal handler
that import nothing a command does not use keep ``retryproof digest`` near a bare
interpreter start; these tests keep a later module-level import from undoing it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from retryproof.conformance.cli import COMMANDS, build_parser, main

TASK = json.dumps({"subject": "Fix login"})


def loaded_by(argv: list[str], stdin: str) -> set[str]:
    """The modules loaded once ``retryproof ARGV`` has run in a fresh interpreter."""
    probe = (
        "import sys, json\nfrom retryproof.conformance.cli import main\nstatus = main(sys.argv[1:])\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\nsys.exit(status)"
    )
    done = subprocess.run([sys.executable, "-c", probe, *argv], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stderr.splitlines()[-1]))


def test_digest_loads_neither_the_run_options_nor_the_process_adapter():
    loaded = loaded_by(["digest"], TASK)
    assert "retryproof.conformance.commands.digest" in loaded
    unused = ("retryproof.conformance.options", "retryproof.adapters", "yaml", "jsonschema", "tabulate", "typing")
    assert sorted(loaded & set(unused)) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_parser_built_for_one_command_parses_and_helps_as_the_full_one(command, capsys):
    """``main`` builds only the chosen subcommand's arguments; its help (and so every
    argument, type and default) is the full parser's."""
    helps = []
    for parser in (build_parser(), build_parser(command)):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1] and "usage: retryproof " + command in helps[0]


def test_a_bad_argument_gets_the_same_error_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["digest", "--bogus"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "error: unrecognized arguments: --bogus\nhint: see 'retryproof digest --help'\n"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_digest_interrupted_while_reading_says_so_and_exits_128_plus_the_signal(signum, status):
    """Without the process adapter loaded, an interrupt still ends the command as every
    command ends: ``interrupted`` and 128 + the signal number, never a traceback."""
    digest = subprocess.Popen(
        [sys.executable, "-m", "retryproof.conformance.cli", "digest", "--jsonl"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert digest.stdin is not None and digest.stdout is not None
        digest.stdin.write(TASK + "\n")
        digest.stdin.flush()
        assert digest.stdout.readline().startswith("sha256:")  # it is inside the command, reading
        time.sleep(0.2)
        digest.send_signal(signum)
        _, stderr = digest.communicate(timeout=30)
    finally:
        digest.kill()
    assert (digest.returncode, stderr) == (status, "interrupted\n")
