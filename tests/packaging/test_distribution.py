"""The installed distribution: one import name, and no collision with a vendor's own
``spec`` or ``adapters`` package.

The wheel is built once per session from a copy of the working tree's sources, so these
tests see exactly the files a user's ``pip install retryproof`` would put on disk, bytecode
aside (these tests do not read it): a pure-Python wheel, which pip installs by unpacking.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest
import yaml
from kit import once_per_session
from sources import copy_of_the_sources


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return once_per_session(tmp_path_factory, "wheel", build_wheel)


def build_wheel(out: Path) -> Path:
    """The wheel, built by pyproject.toml's build backend as pip's build step calls it
    (PEP 517's ``build_wheel``) in one process, with the test environment's setuptools:
    ``pip wheel`` started four processes more (pip, a build environment's install of
    setuptools from the package index, three hooks): about 3 CPU-s against 0.6."""
    sources = out / "sources"
    sources.mkdir()
    copy_of_the_sources(sources)
    built = subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta; print(build_meta.build_wheel({str(out)!r}))"],
        cwd=sources,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # setuptools before 70.1 fails here (no bdist_wheel): the test extra requires 70.1.
    assert built.returncode == 0, f"{built.stderr[-3000:]}\n(is setuptools>=70.1 installed? pip install -e '.[test]')"
    return out / built.stdout.splitlines()[-1]


def test_the_wheel_has_exactly_one_top_level_import_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert packages == {"retryproof"}
    # The contract travels with the code: the kit reads these at run time.
    for data in ("spec/retryproof.yaml", "spec/schemas/report.json", "spec/vectors/write-task-v1.json"):
        assert f"retryproof/{data}" in names
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "retryproof = retryproof.conformance.cli:main" in text
    assert "retryproof = retryproof.conformance.pytest_plugin" in text


def test_the_kit_and_a_vendors_own_spec_and_adapters_packages_live_side_by_side(wheel: Path, tmp_path: Path) -> None:
    # A fresh environment with the wheel installed in it; the kit's dependencies are
    # reached through a path entry (not a site dir, so this environment's editable
    # install of the kit is not loaded there).
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "kit-dependencies.pth").write_text(str(Path(yaml.__file__).resolve().parents[1]) + "\n")
    # The wheel installed as pip installs a pure-Python one (Root-Is-Purelib, no .data
    # folder): its files unpacked into site-packages, nothing compiled (the run below
    # compiles what it imports into the session's bytecode cache). `pip install --target`
    # did the same, with pip's own start as most of the test's CPU (about 1 CPU-s).
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [marker] = [name for name in names if name.endswith(".dist-info/WHEEL")]
        assert "Root-Is-Purelib: true" in archive.read(marker).decode(), "not a pure-Python wheel"
        assert not [name for name in names if ".data/" in name], "a .data folder pip would move elsewhere"
        archive.extractall(site)
    # The vendor's repository: packages named like the kit's folders, first on sys.path.
    vendor = tmp_path / "vendor"
    for name in ("spec", "adapters"):
        (vendor / name).mkdir(parents=True)
        (vendor / name / "__init__.py").write_text(f"OWNER = 'vendor {name}'\n")
    out = tmp_path / "reports"
    script = textwrap.dedent(
        f"""
        import json, sys
        import spec, adapters
        from retryproof.conformance.cli import main
        import retryproof.spec
        status = main(["run", "--only", "WT-CREATE", "--seed", "1", "--out", {str(out)!r}, "--format", "json"])
        print(json.dumps([spec.OWNER, adapters.OWNER, retryproof.spec.__file__, status]))
        """
    )
    done = subprocess.run(
        [python, "-c", script],
        cwd=vendor,
        env={**os.environ, "PYTHONPATH": str(vendor)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    vendor_spec, vendor_adapters, kit_spec, status = json.loads(done.stdout.splitlines()[-1])
    assert (vendor_spec, vendor_adapters) == ("vendor spec", "vendor adapters")
    assert Path(kit_spec).is_relative_to(site), "the kit was not imported from the installed wheel"
    assert status == 0
    report = json.loads((out / "report.json").read_text())
    assert [item["status"] for item in report["scenarios"]] == ["passed"]
