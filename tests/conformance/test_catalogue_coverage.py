"""Every catalogue id has a scenario, bound once."""

import pytest

from retryproof.conformance.catalogue import entry
from retryproof.conformance.scenarios import Scenario, missing_ids, registry, scenario


def test_every_catalogue_id_has_a_scenario():
    assert missing_ids() == []


def test_the_registry_holds_one_scenario_per_id_bound_to_its_entry():
    bound = registry()
    assert all(isinstance(item, Scenario) and item.entry == entry(key) for key, item in bound.items())
    assert all(callable(item.run) for item in bound.values())


def test_a_second_function_for_one_id_is_refused():
    def create(ctx):  # not WT-CREATE's function: a second binding of its id
        pass

    with pytest.raises(ValueError, match="WT-CREATE is bound twice: .*basics.create and .*second_function"):
        scenario("WT-CREATE")(create)
    assert registry()["WT-CREATE"].run.__module__.endswith("scenarios.basics")
