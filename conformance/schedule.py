"""``--jobs N``: scenarios run on N worker threads, their results come back in
catalogue order.

Threads, not processes: a scenario spends its time waiting on harness processes (each
already in its own process group, on its own state directory), and threads in the
kit's process leave one place, the main thread, where a signal arrives and ends every
harness process group. Results are handed on strictly in catalogue order, so the
console lines, the reports and the verdict of ``--jobs 4`` are those of ``--jobs 1``;
only durations differ.

Two kinds of scenario are scheduled apart (the ``scenario`` decorator marks them):

- *alone*: nothing else runs while it does. The A4 races judge a runtime's locking only
  if the racing calls really overlap, which a machine busy with other scenarios' harness
  starts makes less likely; DURABILITY-TRACE runs its harness under strace, many times
  slower, within timeouts sized for an otherwise idle harness. They run first, one at a
  time, while the other workers wait.
- *long*: started before the short ones (FUZZ-MODEL takes as long as many others
  together), so it does not run on by itself at the end.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Overlap:
    """Who may run beside whom: any number of ordinary scenarios share the machine,
    an *alone* scenario holds it by itself. A waiting *alone* scenario goes first: no
    ordinary one starts while it waits."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._sharing = 0
        self._alone = False
        self._waiting_alone = 0

    @contextlib.contextmanager
    def hold(self, alone: bool) -> Iterator[None]:
        with self._changed:
            if alone:
                self._waiting_alone += 1
                self._changed.wait_for(lambda: not self._alone and not self._sharing)
                self._waiting_alone -= 1
                self._alone = True
            else:
                self._changed.wait_for(lambda: not self._alone and not self._waiting_alone)
                self._sharing += 1
        try:
            yield
        finally:
            with self._changed:
                if alone:
                    self._alone = False
                else:
                    self._sharing -= 1
                self._changed.notify_all()


def in_order(
    items: Sequence[Item],
    compute: Callable[[Item], Result],
    jobs: int,
    alone: Callable[[Item], bool] = lambda item: False,
    long: Callable[[Item], bool] = lambda item: False,
) -> Iterator[tuple[Item, Result]]:
    """``(item, compute(item))`` for every item, in the order of ``items``, computed
    on up to ``jobs`` threads (one: right here, each as its turn comes).

    Leaving early (an exception in the consumer, Ctrl-C) cancels the items not yet
    started and waits for those running, which end their own harness processes.
    """
    if jobs <= 1 or len(items) <= 1:
        for item in items:
            yield item, compute(item)
        return
    overlap = Overlap()

    def run(item: Item) -> Result:
        with overlap.hold(alone(item)):
            return compute(item)

    # Start order: the alone ones, then the long ones, then the rest, each in catalogue order.
    start_order = sorted(range(len(items)), key=lambda index: (not alone(items[index]), not long(items[index]), index))
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="retryproof-scenario")
    try:
        futures: dict[int, Future[Result]] = {index: pool.submit(run, items[index]) for index in start_order}
        for index, item in enumerate(items):
            yield item, futures[index].result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
