"""The Prefect behaviours behind the failing cells, shown without retryproof.

A task keyed by the caller's key as README.md describes it (``CacheKeyFnPolicy``,
persisted results, SERIALIZABLE with a ``FileSystemLockManager``), whose body appends a
line to a file: the effect.

    part 1: the key again with another request -> the cached first result, 1 effect
    part 2: rounds of eight threads running the task with one key at once -> how many
            raise "EOF while parsing" from the lock manager, how many effects
    part 3: the process dies inside the task after its effect; the key again, from
            a new process -> it waits on the dead process's lock file (no expiration)
            and is still waiting when the experiment gives up after 20 s

Run (the API is the server of ./setup start):
    .venv/bin/python experiment.py --api-url http://127.0.0.1:4290/api
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

if len(sys.argv) < 3 or sys.argv[1] != "--api-url":
    sys.exit(__doc__)
FOLDER = os.environ.setdefault("EXPERIMENT_DIR", tempfile.mkdtemp())
os.environ.update(
    PREFECT_HOME=os.path.join(FOLDER, "prefect"), PREFECT_API_URL=sys.argv[2], PREFECT_LOGGING_LEVEL="ERROR"
)

from prefect import task  # noqa: E402
from prefect.cache_policies import CacheKeyFnPolicy  # noqa: E402
from prefect.locking.filesystem import FileSystemLockManager  # noqa: E402

POLICY = CacheKeyFnPolicy(cache_key_fn=lambda context, parameters: parameters["key"]).configure(
    key_storage=os.path.join(FOLDER, "keys"),
    lock_manager=FileSystemLockManager(lock_files_directory=Path(FOLDER, "locks")),
    isolation_level="SERIALIZABLE",
)


@task(persist_result=True, cache_policy=POLICY)
def create(subject: str, key: str) -> str:
    with open(os.path.join(FOLDER, "effects.txt"), "a") as handle:
        handle.write(subject + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    if os.environ.get("DIE_IN_TASK"):
        os._exit(9)  # as SIGKILL: the result record is never written
    return f"task for {subject}"


ROUNDS = 10


def effects() -> list[str]:
    try:
        with open(os.path.join(FOLDER, "effects.txt")) as handle:
            return handle.read().split()
    except FileNotFoundError:
        return []


def main() -> None:
    if sys.argv[3:] == ["--die"]:
        create("killed-run", "order-3")
        return
    if sys.argv[3:] == ["--retry"]:
        print(f"        the retry answered {create('killed-run', 'order-3')!r}")
        return
    first, second = create("first", "order-1"), create("second", "order-1")
    print(f"part 1: key order-1 with 'first' -> {first!r}, with 'second' -> {second!r}; effects {effects()}")

    errors: list[str] = []
    for round_ in range(ROUNDS):
        barrier = threading.Barrier(8)

        def call(index: int, key: str = f"order-2-{round_}", barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                create(f"concurrent-{index}", key)
            except Exception as exc:  # the experiment counts what Prefect raises
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=call, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    concurrent = [line for line in effects() if line.startswith("concurrent-")]
    print(
        f"part 2: {ROUNDS} rounds of 8 concurrent calls, one key per round -> {len(errors)} raised "
        f"{sorted(set(errors))}; {len(concurrent)} effects"
    )

    environment = dict(os.environ, DIE_IN_TASK="1")
    subprocess.run([sys.executable, __file__, *sys.argv[1:3], "--die"], env=environment, timeout=120)
    locks = {path.name: path.read_text() for path in Path(FOLDER, "locks").iterdir()}
    print(f"part 3: died in the task after its effect; lock files left: {locks}")
    try:
        subprocess.run([sys.executable, __file__, *sys.argv[1:3], "--retry"], timeout=20)
    except subprocess.TimeoutExpired:
        print("        the retry with key order-3 was still waiting for that lock after 20 s")
    print(f"        effects {[line for line in effects() if line == 'killed-run']}")


if __name__ == "__main__":
    main()
