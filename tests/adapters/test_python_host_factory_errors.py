"""A factory the Python host cannot call, or one that raises, is named in one line on
stderr with its error, as an import error is: the host's own traceback used to be the
hint (``python_host.py, line 170 ... TypeError: posix.getcwd() takes no arguments``)."""

import pytest

from retryproof.adapters.python_host import main


@pytest.mark.parametrize(
    ("reference", "error"),
    [
        ("os:getcwd", "TypeError: "),
        ("vendor_factory:make", "RuntimeError: no database at "),
    ],
    ids=["wrong-signature", "raises"],
)
def test_a_factory_that_fails_is_named_with_its_error_not_a_traceback(tmp_path, monkeypatch, capsys, reference, error):
    (tmp_path / "vendor_factory.py").write_text(
        "def make(state_dir, failpoints):\n    raise RuntimeError(f'no database at {state_dir}')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RETRYPROOF_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("RETRYPROOF_FAILPOINTS", raising=False)
    assert main([reference]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"retryproof python host: {reference}(state_dir, failpoints) failed: {error}"), line
