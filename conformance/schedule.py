"""``--jobs N``: scenarios run on N worker threads, their results come back in
catalogue order.

Threads, not processes: a scenario spends its time waiting on harness processes (each
already in its own process group, on its own state directory), and threads in the
kit's process leave one place, the main thread, where a signal arrives and ends every
harness process group. Results are handed on strictly in catalogue order, so the
console lines, the reports and the verdict of ``--jobs 4`` are those of ``--jobs 1``;
only durations differ.

Two kinds of scenario are scheduled apart (the ``scenario`` decorator marks them):

- *alone*: part of it needs the machine to itself (``Context.alone``). The A4 races judge
  a runtime's locking only if the racing calls really overlap, which a machine busy with
  other scenarios' harness starts makes less likely. Only that part runs alone: the
  harness starts before it share the machine like any other work. These scenarios start
  first, one at a time, beside short ones only (``StartOrder``).
- *long*: several times a typical scenario (FUZZ-MODEL takes as long as many others
  together; the recovery and kill scenarios restart the runtime many times): started
  before the short ones, so it does not run on by itself at the end.
- *shared*: it takes its turn on the run's shared server (``sharing.py``), so it never
  starts while another shared one runs: between its listings, only its own calls reach
  that server. The shared ones take their turns in one order whatever ``--jobs`` says
  (``shared_turns``): ranked by ``turn``, then in the given order. A run ranks the ones
  that restart the server (``takes_server``) after the ones that only share it, whose
  turns then all go to one server, not to a fresh one after each restart.

The pytest plugin's items under pytest-xdist run in processes, not threads: ``Turns``
keeps ``Overlap``'s rule between them with ``flock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Protocol, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
#: The longest an item waits for its turn under pytest-xdist (``Turns``): longer than any
#: scenario of the shipped profiles takes (the nightly FUZZ-MODEL included), so a wait
#: this long means another worker's test hangs; the item then ends in error instead.
TURN_WAIT_S = 3600.0
#: How often a waiting worker tries the lock files again (flock has no timed wait).
TURN_POLL_S = 0.01


class Turn(Protocol):
    """What a running scenario holds: its share of the machine, which ``alone`` turns,
    for the length of a ``with`` block, into the whole machine."""

    def alone(self) -> contextlib.AbstractContextManager[None]: ...


class Solo:
    """The turn of a scenario that runs with nothing beside it (``--jobs 1``): it has
    the machine to itself already."""

    def alone(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


SOLO = Solo()


class Overlap:
    """Who may run beside whom: any number of scenarios share the machine, and one in
    its ``alone`` part holds it by itself. A scenario that asks to be alone lets go of
    its share and waits for the others' to end; while it waits, no scenario starts, and
    none comes back from its own alone part, so it goes first."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._sharing = 0
        self._alone = False
        self._waiting_alone = 0

    def _open(self) -> bool:
        return not self._alone and not self._waiting_alone

    @contextlib.contextmanager
    def share(self) -> Iterator[Turn]:
        """A share of the machine for one scenario, from its start to its end."""
        with self._changed:
            self._changed.wait_for(self._open)
            self._sharing += 1
        try:
            yield self
        finally:
            with self._changed:
                self._sharing -= 1
                self._changed.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Within a share: the machine alone, then the share again."""
        with self._changed:
            self._sharing -= 1
            self._waiting_alone += 1
            self._changed.notify_all()  # another's alone part may have waited for this share
            self._changed.wait_for(lambda: not self._alone and not self._sharing)
            self._waiting_alone -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._changed:
                self._alone = False
                self._changed.notify_all()
                self._changed.wait_for(self._open)
                self._sharing += 1


class NoTurn(Exception):
    """A pytest-xdist worker's test, or a scenario's alone part, did not get its turn
    in time; the message says why."""


class Turns:
    """``Overlap``'s rule between pytest-xdist workers, which are processes:
    items run side by side, a scenario's alone part (``Context.alone``) runs with
    nothing beside it, and one that waits goes first. xdist has no such rule of its own
    (``--dist loadgroup`` only keeps a group on one worker), so the workers lock two
    files, with ``flock``, in a directory the controller made; the kernel drops the
    locks of a worker that dies.

    ``machine`` is held shared by every running item (``take``). An alone part lets go
    of its item's share, then takes ``queue`` and ``machine`` exclusively; leaving, it
    takes ``machine`` shared again before it lets ``queue`` go. Every item passes
    ``queue`` (takes it shared, then lets it go) before it takes ``machine``: flock by
    itself lets new shared holders in past a waiting exclusive one. Letting go of the
    share first is what keeps two alone parts from waiting on each other's share.
    Every wait polls, up to ``wait_s``: flock has no timed wait."""

    def __init__(self, directory: str, wait_s: float = TURN_WAIT_S):
        self.queue = os.path.join(directory, "queue.lock")
        self.machine = os.path.join(directory, "machine.lock")
        self.wait_s = wait_s
        self._share: int | None = None  # the running item's descriptor of ``machine``

    def _open(self, path: str) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def take(self) -> contextlib.ExitStack:
        """The running item's share, held until the returned stack is closed;
        ``NoTurn`` when it did not come within ``wait_s``."""
        deadline = time.monotonic() + self.wait_s
        queue, machine = self._open(self.queue), self._open(self.machine)
        try:
            taken = _lock(queue, fcntl.LOCK_SH, deadline) and _lock(machine, fcntl.LOCK_SH, deadline)
        finally:
            os.close(queue)  # passed: an alone part may queue now
        if not taken:
            os.close(machine)
            raise NoTurn(f"scenarios' alone parts kept the machine to themselves for {self.wait_s:g} s")
        self._share = machine
        turn = contextlib.ExitStack()
        turn.callback(self._let_go)
        return turn

    def _let_go(self) -> None:
        if self._share is not None:
            os.close(self._share)
            self._share = None

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Within the running item's share: the machine alone, then the share again.
        ``NoTurn`` when it did not come within ``wait_s`` (the scenario ends in error);
        an item that did not even get the queue then ends without its share."""
        machine = self._share
        if machine is None:
            raise RuntimeError("an alone part outside a running item's turn")
        deadline = time.monotonic() + self.wait_s
        fcntl.flock(machine, fcntl.LOCK_UN)
        queue = self._open(self.queue)
        queued = False
        try:
            queued = _lock(queue, fcntl.LOCK_EX, deadline)
            if not (queued and _lock(machine, fcntl.LOCK_EX, deadline)):
                raise NoTurn(
                    f"no turn: it runs alone, and other pytest-xdist workers' tests kept the machine for {self.wait_s:g} s"
                )
            yield
        finally:
            if queued:  # the share again, at once: new holders wait at the queue, which is ours
                fcntl.flock(machine, fcntl.LOCK_SH)
            os.close(queue)


def _lock(fd: int, mode: int, deadline: float) -> bool:
    """Lock ``fd`` in ``mode``, trying until ``deadline``; whether it was locked."""
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(TURN_POLL_S)


class StartOrder:
    """Which item a free worker starts next. The alone ones first, one at a time: while
    one runs, the other workers start short items only, so its alone part waits for the
    end of a short item, never for another's setup (eight harness starts in A4-MULTIPROCESS)
    or a long scenario; a worker with nothing short left waits for it to end instead. Then
    the long ones, the longest first (``long`` is about how many typical items one takes,
    0 for a short one): the run cannot end before its longest item, so that one starts
    as early as it can. Then the rest. Otherwise, the given order. Whatever the order, an
    item that ``shared`` marks never starts while another one it marks runs, and only
    when its turn comes (``shared_turns``, by ``turn``)."""

    def __init__(
        self,
        items: Sequence[Item],
        alone: Callable[[Item], bool],
        long: Callable[[Item], int],
        shared: Callable[[Item], bool] = lambda item: False,
        turn: Callable[[Item], int] = lambda item: 0,
    ):
        self._changed = threading.Condition()
        self._pending = list(range(len(items)))
        self._alone = [alone(item) for item in items]
        self._long = [long(item) for item in items]
        self._shared = [shared(item) for item in items]
        #: The shared items not started yet, in the order of their turns.
        self._turns = shared_turns(items, shared, turn)
        self._alone_running = 0
        self._shared_running = False
        self._closed = False

    def take(self) -> int | None:
        """The index of the item to start now, waiting while there is none to start
        yet; ``None`` when none is left or ``close`` was called."""
        with self._changed:
            while not self._closed and self._pending:
                index = self._choose()
                if index is not None:
                    self._pending.remove(index)
                    if self._shared[index]:
                        self._turns.pop(0)
                    self._alone_running += self._alone[index]
                    self._shared_running = self._shared_running or self._shared[index]
                    return index
                self._changed.wait()
            return None

    def _choose(self) -> int | None:
        turn = None if self._shared_running or not self._turns else self._turns[0]
        pending = [index for index in self._pending if not self._shared[index] or index == turn]
        if not pending:
            return None
        if self._alone_running:
            return next((index for index in pending if not self._alone[index] and not self._long[index]), None)
        first_alone = next((index for index in pending if self._alone[index]), None)
        if first_alone is not None:
            return first_alone
        longest = max(self._long[index] for index in pending)
        return next(index for index in pending if self._long[index] == longest)

    def done(self, index: int) -> None:
        with self._changed:
            self._alone_running -= self._alone[index]
            self._shared_running = self._shared_running and not self._shared[index]
            self._changed.notify_all()

    def close(self) -> None:
        """Start nothing more."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


def shared_turns(items: Sequence[Item], shared: Callable[[Item], bool], turn: Callable[[Item], int]) -> list[int]:
    """The indices of the items ``shared`` marks, in the order they take their turns:
    by ``turn``'s rank, then in the given order."""
    marked = [index for index, item in enumerate(items) if shared(item)]
    return sorted(marked, key=lambda index: (turn(items[index]), index))


def in_order(
    items: Sequence[Item],
    compute: Callable[[Item, Turn], Result],
    jobs: int,
    alone: Callable[[Item], bool] = lambda item: False,
    long: Callable[[Item], int] = lambda item: 0,
    shared: Callable[[Item], bool] = lambda item: False,
    turn: Callable[[Item], int] = lambda item: 0,
) -> Iterator[tuple[Item, Result]]:
    """``(item, compute(item, turn))`` for every item, in the order of ``items``,
    computed on up to ``jobs`` threads, which start the items in ``StartOrder``:
    ``alone`` marks the items that ask for an alone part, ``long`` weighs the long ones,
    ``shared`` the ones never started together, which take their turns in the order
    ``turn`` ranks them. One job computes right here, in the given order but for the
    shared items: they fill the shared ones' places in the order of their turns, as any
    number of jobs takes them. Each result is handed on once those before it are.

    Leaving early (an exception in the consumer, Ctrl-C) starts nothing more and waits
    for the items running, which end their own harness processes.
    """
    if jobs <= 1 or len(items) <= 1:
        turns = iter(shared_turns(items, shared, turn))
        computed: dict[int, Result] = {}
        handed = 0
        for index, item in enumerate(items):
            place = next(turns) if shared(item) else index
            computed[place] = compute(items[place], SOLO)
            while handed in computed:
                yield items[handed], computed.pop(handed)
                handed += 1
        return
    overlap = Overlap()
    order = StartOrder(items, alone, long, shared, turn)
    results: list[Future[Result]] = [Future() for _ in items]

    def work() -> None:
        while (index := order.take()) is not None:
            try:
                with overlap.share() as turn:
                    results[index].set_result(compute(items[index], turn))
            except BaseException as exc:  # the consumer raises it when its turn comes
                results[index].set_exception(exc)
            finally:
                order.done(index)

    workers = [threading.Thread(target=work, name=f"retryproof-scenario-{number}") for number in range(jobs)]
    for worker in workers:
        worker.start()
    try:
        for index, item in enumerate(items):
            yield item, results[index].result()
    finally:
        order.close()
        for worker in workers:
            worker.join()
