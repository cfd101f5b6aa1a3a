"""``--jobs``: the long scenarios start longest first, so a run ends near the end of its
longest scenario instead of starting it after shorter long ones."""

from __future__ import annotations

import threading

from retryproof.conformance.scenarios import registry
from retryproof.conformance.schedule import StartOrder


def started(order: StartOrder, items: list[str]) -> list[str]:
    taken = []
    while (index := order.take()) is not None:
        taken.append(items[index])
        order.done(index)
    return taken


def test_the_long_ones_start_longest_first_after_the_alone_ones():
    items = ["SHORT-1", "LONG-3", "ALONE", "LONG-9", "SHORT-2", "LONG-9-AGAIN"]
    weight = {"LONG-3": 3, "LONG-9": 9, "LONG-9-AGAIN": 9}
    order = StartOrder(items, alone=lambda item: item == "ALONE", long=lambda item: weight.get(item, 0))
    # Ties keep the given order; the short ones keep theirs after every long one.
    assert started(order, items) == ["ALONE", "LONG-9", "LONG-9-AGAIN", "LONG-3", "SHORT-1", "SHORT-2"]


def test_the_two_longest_scenarios_start_before_the_other_long_ones():
    weights = {scenario_id: bound.long for scenario_id, bound in registry().items() if bound.long}
    longest = sorted(weights, key=lambda scenario_id: -weights[scenario_id])[:2]
    assert set(longest) == {"FUZZ-MODEL", "CRASH-POINTS"}
    assert min(weights[scenario_id] for scenario_id in longest) > max(
        weight for scenario_id, weight in weights.items() if scenario_id not in longest
    )


def test_a_shared_server_item_never_starts_beside_another():
    items = ["SHARED-1", "SHARED-2", "SHORT", "SHARED-3"]
    order = StartOrder(items, alone=lambda item: False, long=lambda item: 0, shared=lambda item: "SHARED" in item)
    first = order.take()
    assert first is not None and items[first] == "SHARED-1"
    # While it runs, a free worker passes the other shared items by.
    second = order.take()
    assert second is not None and items[second] == "SHORT"
    order.done(second)
    waited: list[str] = []
    worker = threading.Thread(target=lambda: waited.append(items[order.take() or 0]))
    worker.start()
    worker.join(0.2)
    assert worker.is_alive() and not waited  # only shared items are left: it waits
    order.done(first)
    worker.join(5)
    assert waited == ["SHARED-2"]
    order.close()
