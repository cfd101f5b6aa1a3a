"""Shared test configuration: the FUZZ-MODEL Hypothesis profiles, the ``strace``
fixture of the DURABILITY-TRACE tests, the ``pytester`` sessions of the plugin tests,
how many pytest-xdist workers ``-n auto`` starts, and the bound on each phase of a test
(``phase_limit``).

The profiles are registered here when ``pytest --hypothesis-profile retryproof-nightly``
selects one, and only then: a session that names no profile does not import Hypothesis
for them (the pytest-xdist controller never needs it; a test module that does imports
it). Nothing is loaded globally: Hypothesis loads its own ``ci`` profile
when it detects CI, and the fuzz tests take their budget from
``retryproof.conformance.fuzz.profiles.fuzz_settings()``, which inherits from that profile
instead of replacing it.
"""

import atexit
import compileall
import contextlib
import fcntl
import gc
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from kit import UNUSED_PLUGINS
from session_files import session_path, sweep_orphans
from suite_order import long_tests_first, renders_pages

pytest_plugins = ["pytester", "phase_limit"]

#: The kit's packages (the repository's top folders, installed as ``retryproof``).
KIT = Path(__file__).resolve().parents[1]
PACKAGES = ("spec", "conformance", "adapters", "reference_impl")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's own ``pytester``, whose sessions (in this process or a new one) load no
    plugin they never use (``kit.UNUSED_PLUGINS``). An in-process session imports every
    plugin afresh and drops it after: the anyio plugin alone cost each such session
    0.3 CPU-s (22 sessions of test_pytest_plugin.py's bad input: 8.0 CPU-s with it, 1.3
    without, PYTHONDONTWRITEBYTECODE=1 as in CI, where nothing it imports is cached)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(UNUSED_PLUGINS))
    return pytester


@pytest.fixture(scope="session")
def strace() -> str:
    """The strace binary, when it is installed and may trace here; the test is skipped
    otherwise. Installed is not enough: a container without ptrace rights has the
    binary, and DURABILITY-TRACE then skips, which a test expecting a verdict would
    misread."""
    binary = shutil.which("strace")
    if binary is None:
        pytest.skip("strace is not installed")
    done = subprocess.run([binary, "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[-200:]}")
    return binary


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (.ci/run): three workers per CPU this process may use, and one more. Most
    of a test's time is spent in the processes it starts (kit runs, harnesses, servers,
    pytest sessions), and much of it waiting on them (call timeouts, restarts, a run-alone
    turn, a crash point's retries, a lease's expiry), so with few workers the CPUs stand
    idle. The fewer CPU-s the suite costs, the more of its time is such waiting: on 2 CPUs
    (``--dist worksteal``, the README's command, four rounds alternated, load 4-8 from the
    runs themselves), 7 workers took 120-132 s (mean 125) and 202-225 CPU-s, 5 workers
    131-139 s (mean 135) and 195-209 CPU-s. A round later, one run each at load 8-12 from
    other suites: 6 workers 211 s, 7 workers 192 s, 5 workers 227 s; each worker costs about
    0.8 CPU-s that no test counts (its start and collection). Earlier suites, costlier in
    CPU: 5 workers 169 s and 270 CPU-s against 3 workers 205 s and 255 CPU-s; 2 workers
    106 s, 3 workers 82 s, 4 workers 85 s."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 3 * cpus + 1


@pytest.hookimpl(tryfirst=True)  # the profile is registered before Hypothesis's plugin loads it
def pytest_configure(config: pytest.Config) -> None:
    """A Hypothesis profile named on the command line: the kit's are registered (the
    module's docstring); importing Hypothesis cost the controller 0.6 CPU-s, rewriting
    its asserts with no bytecode to cache them in.

    With PYTHONDONTWRITEBYTECODE set (as in CI), every process the session starts
    (each pytest-xdist worker, and the hundreds of kit runs, harnesses, servers and pytest
    sessions the tests start) would compile from source every module that has no cached
    bytecode, which after an editable install is every module of the kit. The user asked
    for no bytecode in their tree, not for slow tests: the session's processes cache it
    instead under a temporary ``PYTHONPYCACHEPREFIX`` of its own, removed when the session
    ends. A prefix the user chose is left alone. The pytest-xdist controller sets it up
    (filling it costs a few tenths of a CPU-second once, ``_link``), the workers inherit
    it; a session without workers (one test, ``-n0``) starts too few processes to gain
    that back. Paired on 2 CPUs, both runs
    at once at load 9-24: the suite took 359 CPU-s with the prefix, 386 without. Where
    bytecode is written, the test modules' rewritten asserts are cached while the workers
    start, and each worker waits for them before it collects (``_rewrite_once``)."""
    # At its exit the interpreter walks its whole heap again in a last full collection,
    # after pytest's own (which reports an object's unraisable error): frozen, not walked.
    atexit.register(gc.freeze)
    # pytest rewrites the asserts of every module of a distribution that registers a pytest
    # plugin: all of Hypothesis, whose own asserts no test reads (76 modules, 0.8-1.0 CPU-s
    # to rewrite where no bytecode is cached: once in a session on workers, in every session
    # without). Hypothesis imports as installed instead. The set is pytest's private one, and
    # there is none under --assert=plain.
    marked = getattr(config.pluginmanager.rewrite_hook, "_must_rewrite", None)
    if marked is not None and "hypothesis" not in sys.modules:
        marked.discard("hypothesis")
    if config.getoption("--hypothesis-profile", None):
        from retryproof.conformance.fuzz.profiles import register_profiles

        register_profiles()
    if REWRITING in getattr(config, "workerinput", {}):
        _await_rewrite(config.workerinput[REWRITING])  # type: ignore[attr-defined]
    _temporary_files_in_memory()
    workers = getattr(config.option, "numprocesses", None) or 0
    if not workers:
        return
    if sys.dont_write_bytecode and not os.environ.get("PYTHONPYCACHEPREFIX"):
        memory = _in_memory()
        sweep_orphans(BYTECODE, memory)
        prefix = session_path(BYTECODE, memory, folder=True)
        config.add_cleanup(lambda: shutil.rmtree(prefix, ignore_errors=True))
        _seed_bytecode(prefix)
        os.environ["PYTHONPYCACHEPREFIX"] = prefix
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        sys.pycache_prefix, sys.dont_write_bytecode = prefix, False
    if not sys.dont_write_bytecode:
        _rewrite_once(config)


def _temporary_files_in_memory() -> None:
    """The session's temporary files (pytest's ``tmp_path``, and every harness's state
    and scratch folder the kit makes) in ``MEMORY`` where it has room, unless ``TMPDIR``
    names a folder: the processes the session starts inherit it. The runtimes under test
    fsync every step they make durable, hundreds of times a run; on a shared machine's
    ext4 each sync costs kernel CPU, in memory next to none (the Node runtime's 100
    writes: 208-239 ms of CPU against 122-123). What the kit judges of durability it reads
    from the system calls (strace), never from the disk. The whole suite, two alternated
    pairs at load 4-8 (benchmarks/bench_suite.py): 175 and 148 CPU-s on ext4, 115 and 97
    here (0.66x), 106 and 88 s against 71 and 62 s."""
    if "TMPDIR" not in os.environ and (memory := _in_memory()):
        os.environ["TMPDIR"] = memory
        tempfile.tempdir = None  # asked again, gettempdir() reads TMPDIR


def _seed_bytecode(prefix: str) -> None:
    """Fill ``prefix`` before the first worker starts, so the workers and the processes
    they start at once do not each compile the same modules: a link to the installed
    bytecode of every module of the environment's site-packages (the prefix would hide it
    from them; the servers under test import much that pytest does not, the MCP SDK's
    3 CPU-s to compile among it), of the standard library's modules this process imported,
    and of the kit's where it has some (.ci/run compiles them); the rest of the kit compiled."""
    tag = f".{sys.implementation.cache_tag}.pyc"
    installed = {
        os.path.join(directory, "__pycache__", name[: -len(".py")] + tag)
        for module in list(sys.modules.values())
        for directory, name in [os.path.split(getattr(module, "__file__", None) or "")]
        if name.endswith(".py")
    }
    for packages in {*site.getsitepackages(), *(str(KIT / package) for package in PACKAGES)}:
        for root, _, names in os.walk(packages):
            if os.path.basename(root) == "__pycache__":
                installed.update(os.path.join(root, name) for name in names if name.endswith(tag))
    for pyc in installed:
        cache = os.path.dirname(pyc)
        linked = prefix + os.path.dirname(cache)  # the prefix mirrors the source's folder
        if os.path.exists(pyc):
            os.makedirs(linked, exist_ok=True)
            _link(pyc, os.path.join(linked, os.path.basename(pyc)))
    own, sys.pycache_prefix = sys.pycache_prefix, prefix
    try:
        for package in PACKAGES:
            # quiet=2: compileall refuses to replace a symbolic link (in memory, every link is
            # one) to bytecode older than its source, and would say so; the first process
            # that imports such a module compiles it instead.
            compileall.compile_dir(KIT / package, quiet=2)
    finally:
        sys.pycache_prefix = own


#: The names of the session's bytecode prefix and of ``_rewrite_once``'s lock file begin so
#: (``session_files``: a session killed with SIGKILL leaves them, the next one removes them).
BYTECODE = "retryproof-bytecode-"
REWRITING_LOCK = "retryproof-rewriting-"
#: A file system in memory, where the system has one (Linux).
MEMORY = "/dev/shm"
#: The room the bytecode prefix may need there, with some to spare: the venvs the tests
#: install compile into it (22 MB after the two test files that install them).
MEMORY_ROOM = 1 << 30


def _in_memory() -> str | None:
    """The folder for the bytecode prefix: ``MEMORY`` where it has room, else the system's
    temporary folder (None). Its folders cost little there: on a shared machine's ext4, under
    other processes' writes, making or removing one took up to 3.5 ms, and the prefix has
    330 at first and 540 once the tests' venvs are installed. Removing it at the end of a
    run of the two test files that install venvs took 1.3-5.3 s on ext4 (load 8-14),
    0.04-0.11 s in memory; seeding it, 0.20-0.26 CPU-s and 0.09-0.11."""
    try:
        free = os.statvfs(MEMORY)
    except OSError:
        return None
    return MEMORY if free.f_bavail * free.f_frsize >= MEMORY_ROOM and os.access(MEMORY, os.W_OK) else None


def _link(source: str, link: str) -> None:
    """A hard link where the file system allows one, else a symbolic link. On ext4 a
    symbolic link whose target is longer than 60 bytes (every one here) costs a block of
    its own: the session's 2808 took 1.0-1.2 CPU-s, hard links 0.11-0.12; in memory
    (``_in_memory``, another file system) they take 0.1 CPU-s. A process that
    writes bytecode in the prefix replaces the file (importlib writes a new one and renames
    it), so the installed one is never written through either link."""
    try:
        os.link(source, link)
    except FileExistsError:
        pass
    except OSError:  # another file system, or a file the user may not link (protected_hardlinks)
        with contextlib.suppress(FileExistsError):
            os.symlink(source, link)


#: The ``workerinput`` key of the lock file a worker waits on while ``_rewrite_once`` runs.
REWRITING = "retryproof_rewriting"
#: How long a worker waits for it (as long as the collection was bounded before it ran alone).
REWRITE_BOUND_S = 120.0
#: On the controller: that lock file, for ``pytest_configure_node``.
_REWRITE_LOCK = pytest.StashKey[str]()


def _rewrite_once(config: pytest.Config) -> None:
    """Collect the session's tests once, in a pytest of its own, while the workers start,
    when some test file has no assertion-rewritten bytecode yet: pytest rewrites the
    asserts of every test module (and of the hypothesis plugin's package) on import and
    caches the result, but the workers start at once and each rewrote everything itself:
    a worker's collection took 2.9-4.4 CPU-s, 1.0-1.6 cached, and this one 3.2. Starting 5
    workers that run no test (``-n 5 -k`` matching none, PYTHONDONTWRITEBYTECODE=1, 2 CPUs,
    load 3.4-3.9, twice each, alternating): 16.3 and 17.9 CPU-s before, 12.7 and 14.3 with
    it. The collection's outcome is the workers' to report; this one only fills the cache.

    It runs on one CPU, and until it ends the workers would not start: each worker's start
    before its collection (its interpreter, pytest, the plugins, about 0.3 CPU-s, paid 7
    times on 2 CPUs) now runs beside it, and a worker waits for it only before collecting
    (``_await_rewrite``), on a lock the collection holds until it exits (it inherits the
    descriptor; a flock belongs to the open file, so it is let go when the process ends,
    however it ends). Bounded like every wait: a worker stops waiting after
    ``REWRITE_BOUND_S``, and the collection is ended with the session."""
    tag = f"-pytest-{pytest.__version__}.pyc"
    skipped = config.getini("norecursedirs")  # a virtualenv's tests (.venv) pytest never collects
    tests = [
        path
        for argument in config.args
        for given in [Path(argument.split("::")[0]).resolve()]
        for path in ([given] if given.is_file() else given.rglob("*.py"))
        if path.name.startswith("test_") or path.name == "conftest.py"
        if not any(fnmatch(part, pattern) for part in path.relative_to(given).parts[:-1] for pattern in skipped)
    ]
    if all(any(_cache_of(path).glob(f"{path.stem}.*{tag}")) for path in tests):
        return
    # Without the cyclic garbage collector: rewriting makes and drops a million AST nodes,
    # none in a cycle, and each full collection walked the growing heap again (13 of them,
    # 0.6 CPU-s); its peak memory grew 3%, to 73 MB. Nor the interpreter's teardown, which
    # frees it all: the bytecode it wrote is all it leaves.
    without_gc = "import gc, os, pytest; gc.disable(); os._exit(pytest.main())"
    collect = ("--collect-only", "-q", "-n0", "-p", "no:cacheprovider", *config.args)
    command = [sys.executable, "-c", without_gc, *collect]
    sweep_orphans(REWRITING_LOCK, None)
    path = session_path(REWRITING_LOCK, None, folder=False)
    lock = os.open(path, os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        process = subprocess.Popen(
            command,
            cwd=config.invocation_params.dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=[lock],
        )
    finally:
        os.close(lock)  # the collection's own descriptor holds the lock from here on

    def end() -> None:
        process.kill()  # long over by now, unless it outlived every worker's wait
        process.wait(timeout=30)
        os.unlink(path)

    config.add_cleanup(end)
    config.stash[_REWRITE_LOCK] = path


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: the controller, before each worker starts
def pytest_configure_node(node: Any) -> None:
    if _REWRITE_LOCK in node.config.stash and node.gateway.spec.popen:  # a worker on this machine (not --tx ssh=)
        node.workerinput[REWRITING] = node.config.stash[_REWRITE_LOCK]


def _await_rewrite(path: str) -> None:
    """On a worker, before its collection: until ``_rewrite_once``'s collection has ended
    (its lock can be shared), at most ``REWRITE_BOUND_S``."""
    with open(path) as lock:
        deadline = time.monotonic() + REWRITE_BOUND_S
        while time.monotonic() < deadline:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(0.05)


def _cache_of(source: Path) -> Path:
    """Where this interpreter caches the bytecode of ``source`` (importlib's rule)."""
    if sys.pycache_prefix:
        return Path(sys.pycache_prefix, *source.parent.parts[1:])
    return source.parent / "__pycache__"


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[object]:
    """Without the cyclic garbage collector: what a collection makes lives as long as the
    session, and each full collection walked the growing heap again (three of them in each
    pytest-xdist worker). Frozen after it (``gc.freeze``), for the same reason: the tests'
    own full collections (3-9 a worker) walked it every time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On pytest-xdist workers, each worker starts on its share of the longest tests
    (``suite_order``); every worker reorders alike (the controller requires equal
    collections)."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if workers > 1:
        items[:] = long_tests_first(items, workers)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A headless Chromium (tests/conformance/headless_chromium.py) is ended once the next
    test renders no page (``suite_order.BROWSER_FILES``), instead of waiting for pages until
    its worker ends."""
    try:
        return (yield)
    finally:
        browser = sys.modules.get("headless_chromium")
        if browser is not None and (nextitem is None or not renders_pages(nextitem)):
            browser.close()
