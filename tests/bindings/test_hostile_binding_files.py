"""Binding files written to exhaust the kit: an alias bomb, a value that contains
itself, a file of many megabytes. Each is a user error naming the file, exit 2, in
bounded time and memory, before any server starts.

Only the alias bomb runs the kit in a process of its own, its memory capped: a reader
that expands it grows to gigabytes. The others cannot outgrow their text (a file past
the size limit, a value that contains itself or brackets nested past the recursion
limit: a walk without the kit's checks recurses until Python stops it), so they run in
the test's process (``run_cli``), which spares each a process start, 0.15-0.2 CPU-s."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
from binding_helpers import run_cli
from test_binding_errors import assert_binding_error

#: The kit's address space in these tests: the alias bomb of issue 22 grew to 2.3 GB.
MEMORY_LIMIT = 1024 * 1024 * 1024
#: Brackets nested twice as deep as YAML's parser recurses before Python's recursion
#: limit stops it (about 500 in a process of the CLI's own, fewer in a test's), so that
#: limit is what this file meets; 5000 cost 0.25-0.5 CPU-s more, in the scanner, for the
#: same refusal.
DEEP = 1000


def alias_bomb(levels: int) -> str:
    """``name`` built from ``levels`` nested aliases, each ten times the one below: a
    few hundred bytes of YAML, 10**(levels+1) strings once expanded."""
    lines = ["binding: retryproof-binding/1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 10)}]" for level in range(1, levels + 1)]
    return "\n".join([*lines, f"name: *a{levels}", ""])


def run_limited(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with its memory capped, so a blow-up fails quickly instead of swapping."""
    return subprocess.run(
        [sys.executable, "-m", "retryproof.conformance.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT)),
    )


@pytest.mark.parametrize(
    "text, says, run",
    [
        (alias_bomb(8), "once its aliases are expanded", run_limited),
        ("binding: retryproof-binding/1\nname: &n [x, *n]\n", "contains itself", run_cli),
        (
            "binding: retryproof-binding/1\nname: " + "x" * (2 * 1024 * 1024) + "\n",
            "is larger than 1048576 bytes",
            run_cli,
        ),
        ("binding: retryproof-binding/1\nname: " + "[" * DEEP + "]" * DEEP + "\n", "nests deeper than", run_cli),
    ],
    ids=["alias-bomb", "recursive-alias", "50-megabyte-name", "deep"],
)
def test_a_binding_file_built_to_exhaust_the_kit_is_refused(tmp_path, text, says, run):
    path = tmp_path / "hostile.yaml"
    path.write_text(text, encoding="utf-8")
    done = run("run", "--binding", str(path), "--out", str(tmp_path / "out"))
    assert_binding_error(done, path, says)


def test_aliases_that_expand_modestly_are_still_read(tmp_path):
    """Anchors and aliases are YAML; only an expansion larger than the text is refused."""
    import yaml

    from retryproof.conformance.errors import load_user_file

    path = tmp_path / "anchors.yaml"
    path.write_text("base: &base {a: 1, b: 2}\none: *base\ntwo: *base\n", encoding="utf-8")
    assert load_user_file(str(path), "binding", yaml.safe_load, "YAML", "")["two"] == {"a": 1, "b": 2}
