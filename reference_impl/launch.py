"""How the kit starts the reference harness: ``python -S launch.py [--fault NAME]``, the
same ``main`` as ``python -m retryproof.reference_impl``, without the ``site`` module.

A run starts the reference about a hundred times (a selftest, several hundred), and
``site`` was the costliest part of each start: in an editable install (the README's)
it runs the install's import hook, which loads pathlib, re, contextlib and
importlib.util, about a third of the start's CPU (benchmarks/bench_start.py). The
reference needs nothing from site-packages, only the standard library and the two
packages beside this file's folder (``reference_impl`` and ``spec``); both layouts,
the source tree of an editable install and ``site-packages/retryproof`` of a wheel,
keep them there. So the ``retryproof`` namespace package is made here, with that one
folder as its path, and nothing else changes: ``PYTHONPATH`` still applies, and a
vendor reading the reference starts it with ``python -m retryproof.reference_impl``.
"""

import os
import sys


def launch() -> None:
    folder = os.path.dirname(os.path.realpath(__file__))
    # As a script, this file's folder is sys.path[0] (unless PYTHONSAFEPATH says otherwise);
    # its modules are reached as ``retryproof.reference_impl.*`` only, never as top-level names.
    if sys.path and os.path.realpath(sys.path[0]) == folder:
        del sys.path[0]
    package = type(sys)("retryproof")
    package.__path__ = [os.path.dirname(folder)]
    sys.modules["retryproof"] = package

    from retryproof.reference_impl.__main__ import main  # after the package exists

    sys.exit(main())


# Only as the script the kit starts: imported (a documentation tool walking the
# package), it must not replace the package it was imported from.
if __name__ == "__main__":
    launch()
