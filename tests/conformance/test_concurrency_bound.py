"""``--concurrency`` has an upper bound, 256: 100000 made a run that never ended (as many
harness processes for A4-MULTIPROCESS, eight times as many pipelined calls for
A4-CONCURRENT), and SIGTERM took a minute to act on 30000."""

from kit import retryproof_here

from retryproof.conformance.options import racing_callers


def test_a_concurrency_above_the_bound_is_a_user_error_with_a_hint(tmp_path):
    # --only a scenario that races nothing: without the bound, a short run that passes.
    done = retryproof_here("run", "--concurrency", "100000", "--only", "WT-CREATE", "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    first, hint = done.stderr.splitlines()[:2]
    assert first == (
        "error: argument --concurrency: 100000 must be at most 256: each caller of A4-MULTIPROCESS is a harness"
        " process (races show at the default, 8)"
    )
    assert hint.startswith("hint: ")
    assert not (tmp_path / "out").exists()
    assert racing_callers("256") == 256  # the bound itself is taken
