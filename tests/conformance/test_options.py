"""The options of a run are declared once (``options.RUN_OPTIONS``): ``retryproof run``
and the pytest plugin both render that table, so their flags cannot disagree on a type,
a metavar, a help line or a default."""

from __future__ import annotations

import argparse
from typing import Any

from retryproof.conformance import pytest_plugin
from retryproof.conformance.cli import build_parser
from retryproof.conformance.options import REPORT_FORMATS, RUN_OPTIONS
from retryproof.conformance.writers.files import FORMATS


def _run_parser() -> argparse.ArgumentParser:
    subcommands = next(
        action for action in build_parser("run")._actions if isinstance(action, argparse._SubParsersAction)
    )
    return subcommands.choices["run"]


class _Group:
    """What ``pytest_addoption`` is handed, recording each option it adds."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def getgroup(self, name: str, description: str = "") -> _Group:
        return self

    def addoption(self, flag: str, **keywords: Any) -> None:
        self.options[flag] = keywords


def test_retryproof_run_renders_every_option_of_the_table_and_nothing_else():
    actions = {action.option_strings[0]: action for action in _run_parser()._actions if action.option_strings}
    assert set(actions) - {"-h"} == {f"--{option.name}" for option in RUN_OPTIONS}
    for option in RUN_OPTIONS:
        action = actions[f"--{option.name}"]
        shown = (action.dest, action.type, action.metavar, action.help, action.default)
        assert shown == (option.dest, option.type, option.metavar, option.help, option.default), option.name


def test_the_pytest_plugin_renders_the_same_options_as_retryproof_name():
    group = _Group()
    pytest_plugin.pytest_addoption(group)  # type: ignore[arg-type]
    wanted = {f"--retryproof-{option.name}": option for option in RUN_OPTIONS if option.pytest}
    assert set(group.options) == {"--retryproof", *wanted}
    for flag, option in wanted.items():
        assert group.options[flag] == option.parser_arguments(), flag
    # Left out of the plugin only where pytest decides instead: every format is written,
    # and pytest-xdist spreads the scenarios.
    assert {option.name for option in RUN_OPTIONS if not option.pytest} == {"format", "jobs"}


def test_the_target_options_of_the_table_exclude_each_other_in_retryproof_run():
    run = _run_parser()
    [exclusive] = run._mutually_exclusive_groups
    assert {action.option_strings[0] for action in exclusive._group_actions} == {
        f"--{option.name}" for option in RUN_OPTIONS if option.target
    }


def test_the_format_names_are_the_formats_the_files_writer_renders():
    assert tuple(FORMATS) == REPORT_FORMATS
