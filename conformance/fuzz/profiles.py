"""Hypothesis settings profiles for FUZZ-MODEL: dev, CI and nightly budgets.

The kit's own tests (``tests/conftest.py``) and the FUZZ-MODEL scenario register and
choose them through this one module, so "the CI budget" means one thing everywhere.

Hypothesis itself loads its built-in ``ci`` profile when it detects a CI environment
(``CI`` or a provider variable is set; see ``hypothesis._settings.is_in_ci``). We never
register a profile named ``ci`` (that would replace the built-in one) and never load
another profile over it: ``retryproof-ci`` *inherits* from the built-in ``ci`` profile
(derandomized, no example database, ``print_blob``) and only adds the fuzz budget.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

DEV = "retryproof-dev"
CI = "retryproof-ci"
NIGHTLY = "retryproof-nightly"
PROFILES = (DEV, CI, NIGHTLY)
#: Set to one of PROFILES to choose explicitly (e.g. a nightly CI job).
ENV_VAR = "RETRYPROOF_FUZZ_PROFILE"

# Every example starts real harness processes, so wall-clock deadlines would only
# measure the machine; too_slow and the data-size checks would flag exactly that.
_SLOW_IS_EXPECTED: dict[str, Any] = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
# The replay file is FUZZ-MODEL's persistence. An example database would leave
# .hypothesis/ in the user's working directory and feed one runtime's histories to the next.
_NO_DATABASE: dict[str, Any] = dict(database=None)


def register_profiles() -> None:
    """Register the three profiles; safe to call more than once."""
    # dev keeps `retryproof run` to seconds; CI spends twice that, enough to find the
    # bundled recovery defects (tests/conformance/test_fuzz_model.py); nightly explores.
    settings.register_profile(DEV, max_examples=10, stateful_step_count=10, **_NO_DATABASE, **_SLOW_IS_EXPECTED)
    settings.register_profile(
        CI,
        parent=settings.get_profile("ci"),
        max_examples=20,
        stateful_step_count=10,
        derandomize=True,
        **_NO_DATABASE,
        **_SLOW_IS_EXPECTED,
    )
    settings.register_profile(NIGHTLY, max_examples=400, stateful_step_count=40, **_NO_DATABASE, **_SLOW_IS_EXPECTED)


def choose_profile(explicit: str | None = None) -> str:
    """The profile FUZZ-MODEL runs with.

    An explicit choice (argument, then ``RETRYPROOF_FUZZ_PROFILE``) wins; a profile of
    ours already loaded (``pytest --hypothesis-profile retryproof-nightly``) is kept;
    when Hypothesis loaded its own ``ci`` profile, the CI budget is used; else dev.
    """
    register_profiles()
    choice = explicit or os.environ.get(ENV_VAR)
    if choice:
        if choice not in PROFILES:
            from retryproof.conformance.errors import KitError

            raise KitError(f"unknown fuzz profile {choice!r}", f"use one of {', '.join(PROFILES)}")
        return choice
    current = settings.get_current_profile_name()
    if current in PROFILES:
        return current
    return CI if current == "ci" else DEV


def fuzz_settings(explicit: str | None = None) -> settings:
    """The settings object of the chosen profile (never loaded globally, so the
    rest of a test session keeps whatever profile it runs under)."""
    return settings.get_profile(choose_profile(explicit))


def shard_share(seed: int, index: int, count: int, explicit: str | None = None) -> tuple[int, int]:
    """The seed and example budget of shard ``index`` of ``count`` (1-based): the
    profile's budget dealt out as evenly as it goes (at least one example each), each
    shard under its own seed, so the shards explore different histories and together
    spend the budget of one run. Shard 1 of 1 is the unsharded run."""
    budget = fuzz_settings(explicit).max_examples
    examples = budget // count + (1 if index <= budget % count else 0)
    return seed * count + index - 1, max(1, examples)


class _ProcessWide:
    """Hypothesis state that is process-wide, held by every exploration running at once
    in this process (``--jobs``, the selftest): the first one in calls ``enter``, the
    last one out ``leave``."""

    def __init__(self, enter: Callable[[], None], leave: Callable[[], None]) -> None:
        self._enter, self._leave = enter, leave
        self._lock = threading.Lock()
        self._users = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._enter()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._leave()


class _TemporaryHome:
    """One temporary Hypothesis home directory while it is held."""

    def __init__(self) -> None:
        self._home: tempfile.TemporaryDirectory[str] | None = None

    def enter(self) -> None:
        self._home = tempfile.TemporaryDirectory(prefix="retryproof-hypothesis-")
        set_hypothesis_home_dir(self._home.name)

    def leave(self) -> None:
        set_hypothesis_home_dir(None)  # back to Hypothesis's own resolution
        if self._home is not None:
            self._home.cleanup()
            self._home = None


_HOME = _TemporaryHome()
_STORAGE = _ProcessWide(_HOME.enter, _HOME.leave)


class _NoLocalConstants:
    """Hypothesis's *local constants* switched off while held. Hypothesis draws an
    integer, now and then, from the constants in the source of every module it deems
    local (not installed in site-packages: an editable install of the kit, a vendor's
    own modules, as the pytest plugin loads them), parsing each such module once per
    process to find them. For FUZZ-MODEL that made the histories of a seed depend on how
    the kit was installed (from an editable install, the kit's own modules are local:
    seeds 0 and 7 explored other histories with their constants than without) and on
    which modules of the user's were loaded, and cost a third of its own CPU time. The
    switch is internal to Hypothesis: where it is absent, nothing is switched. Its cache
    of the pools drawn from is emptied both ways, so neither side draws from the other's."""

    def __init__(self) -> None:
        self._collect: Callable[[], Any] | None = None

    def enter(self) -> None:
        from hypothesis.internal.conjecture import providers

        if all(hasattr(providers, name) for name in ("_get_local_constants", "CONSTANTS_CACHE", "Constants")):
            self._collect = providers._get_local_constants
            providers._get_local_constants = providers.Constants
            providers.CONSTANTS_CACHE.cache.clear()

    def leave(self) -> None:
        from hypothesis.internal.conjecture import providers

        if self._collect is not None:
            providers._get_local_constants, self._collect = self._collect, None
            providers.CONSTANTS_CACHE.cache.clear()


_CONSTANTS = _NoLocalConstants()
_NO_LOCAL_CONSTANTS = _ProcessWide(_CONSTANTS.enter, _CONSTANTS.leave)


@contextmanager
def without_local_constants() -> Iterator[None]:
    """An exploration's draws come from its strategies and seed alone (``_NoLocalConstants``)."""
    with _NO_LOCAL_CONSTANTS.held():
        yield


@contextmanager
def private_storage() -> Iterator[None]:
    """Hypothesis's own files (its constants cache, beside the example database) in a
    temporary directory for the duration of a fuzz run, not in ``./.hypothesis`` of
    whatever directory the user ran the kit from. A storage directory the user chose
    (``HYPOTHESIS_STORAGE_DIRECTORY``) is kept."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    with _STORAGE.held():
        yield
