"""A spec file never changes without a version step and a CHANGELOG line.

``spec/releases.json`` records each released ``spec_version`` with the fingerprint of
its files (``retryproof.spec.fingerprint``). A released version's files are frozen: if
they change, this test fails until ``spec_version`` steps to a version not yet released
and the CHANGELOG's Unreleased section names it; releasing records the new
fingerprint. So one ``spec_version`` can never again name many texts."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from retryproof import spec
from retryproof.spec import SPEC_VERSION, contract_files, fingerprint, releases

REPO = Path(__file__).resolve().parents[2]
CHANGELOG = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")


def semver(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def unreleased(changelog: str) -> str:
    """The CHANGELOG's ``## Unreleased`` section."""
    return changelog.split("## Unreleased", 1)[1].split("\n## ", 1)[0] if "## Unreleased" in changelog else ""


def version_problem(version: str, printed: str, recorded: dict[str, str], changelog: str) -> str | None:
    """Why the spec files (fingerprint ``printed``) may not carry ``version``."""
    if version in recorded:
        if recorded[version] != printed:
            return (
                f"the files of released spec {version} changed (now {printed}): step spec_version in "
                "spec/retryproof.yaml and spec/__init__.py and add a CHANGELOG line under Unreleased"
            )
        return None
    newest = max(recorded, key=semver)
    if semver(version) <= semver(newest):
        return f"spec_version {version} is not above the newest release {newest}"
    if f"`spec_version` {version}" not in unreleased(changelog):
        return f"the CHANGELOG's Unreleased section does not name `spec_version` {version}"
    return None


def test_the_spec_files_are_those_of_their_version_or_of_an_unreleased_step():
    assert version_problem(SPEC_VERSION, fingerprint(), releases(), CHANGELOG) is None


def test_every_release_has_a_changelog_entry_and_a_text_of_its_own():
    for version in releases():
        assert f"`spec_version` {version}" in CHANGELOG, version
    assert len(set(releases().values())) == len(releases())
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", value) for value in releases().values())


@pytest.fixture
def spec_copy(tmp_path, monkeypatch):
    """The spec's files copied, and ``retryproof.spec`` reading the copy."""
    folder = tmp_path / "spec"
    for name in contract_files():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(spec.__file__).parent / name, folder / name)
    monkeypatch.setattr(spec, "_FOLDER", str(folder))
    fingerprint.cache_clear()
    yield folder
    fingerprint.cache_clear()


@pytest.mark.parametrize("name", ["retryproof.yaml", "schemas/receipt.json", "vectors/write-task-v1.json"])
def test_a_changed_file_of_a_released_version_fails_the_check(spec_copy, name):
    """What issue 22 found: receipt.json and the vectors changed under 2.0.0. Any one
    byte of any contract file changes the fingerprint."""
    recorded = {SPEC_VERSION: fingerprint()}
    assert version_problem(SPEC_VERSION, fingerprint(), recorded, CHANGELOG) is None
    path = spec_copy / name
    path.write_bytes(path.read_bytes().replace(b"\n", b"\n ", 1))
    fingerprint.cache_clear()
    problem = version_problem(SPEC_VERSION, fingerprint(), recorded, CHANGELOG)
    assert problem and problem.startswith(f"the files of released spec {SPEC_VERSION} changed")


def test_a_version_step_without_a_changelog_line_fails_the_check():
    recorded = {"2.0.0": "sha256:" + "0" * 64}
    changelog = "# Changelog\n\n## Unreleased\n\n### Kit\n- something\n\n## 0.1.0\n- `spec_version` 9.0.0\n"
    assert "does not name `spec_version` 9.0.0" in version_problem("9.0.0", "x", recorded, changelog)
    assert "not above the newest release" in version_problem("1.5.0", "x", recorded, changelog)
    assert version_problem("9.0.0", "x", recorded, changelog.replace("- something", "- `spec_version` 9.0.0")) is None


def test_the_contract_files_are_the_yaml_every_schema_and_every_vector_file():
    assert {"retryproof.yaml", "schemas/report.json", "vectors/submission-id.json"} <= set(contract_files())
    assert "releases.json" not in contract_files()  # it records fingerprints; it cannot hold its own


# --- What a vendor upgrading from spec/ and the CHANGELOG alone needs stated (issue 22) ----


def rule(section: str, rule_id: str) -> str:
    return next(item["text"] for item in spec.load_spec()[section]["rules"] if item["id"] == rule_id)


def test_the_id_rule_says_the_pattern_matches_the_whole_string():
    """Python's re.match with $ accepts "a\\n", which the vectors reject: the rule says so."""
    pattern = spec.load_spec()["digest"]["submission_id"]["pattern"]
    assert re.match(pattern, "a\n") and not re.fullmatch(pattern, "a\n")
    text = rule("digest", "DIGEST-R16")
    assert "whole string" in text and "ECMA-262" in text and "re.fullmatch" in text


def test_the_changelog_says_invalid_input_sends_every_invalid_vector_id():
    stricter = CHANGELOG.split("- Stricter, so a major `spec_version` step", 1)[1].split("\n- ", 1)[0]
    assert "every invalid case of `vectors/submission-id.json`" in stricter


def test_the_policy_and_the_line_rule_leave_nothing_to_guess():
    readme = (REPO / "spec" / "README.md").read_text(encoding="utf-8")
    assert "a SHOULD scenario, a vector" in readme and "a MUST scenario added" in readme
    text = rule("protocol_spec", "PROTOCOL-R7")
    assert "U+0020" in text and "U+0009" in text and "U+000D" in text
    assert "vertical tab (U+000B)" in text and "form feed (U+000C)" in text and "bad_message" in text
    nemesis = next(item for item in spec.load_spec()["scenarios"] if item["id"] == "KILL-NEMESIS")
    assert "a harness declares none, so its bound is 0" in nemesis["method"]
