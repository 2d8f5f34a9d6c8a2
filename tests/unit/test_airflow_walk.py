"""Airflow's run list paged while it changes: the walk steps back when the list moved by more
than its overlap, and gives up (to be tried again) when it keeps moving."""

from __future__ import annotations

import pytest

from flowledger.connectors import airflow
from flowledger.connectors.airflow import AirflowConnector, ListMoved
from tests.support.fakes.airflow import FakeAirflow


def walk(fake: FakeAirflow) -> list[str]:
    connector = AirflowConnector(fake.client(), fake.settings(page_size=40))
    return [name for page in connector.present_ids() for name in page]


def test_a_list_that_lost_everything_read_so_far_is_walked_again_from_where_it_holds() -> None:
    fake = FakeAirflow()
    made = fake.add(300)
    fake.before_list[5] = lambda: [fake.delete(name) for name in made[:180]]
    listed = walk(fake)
    assert fake.ids() <= set(listed)
    assert len(listed) == len(set(listed))  # what a page repeats is left out
    offsets = [int(r.url.params["offset"]) for r in fake.list_requests()]
    assert offsets[5:8] == [offsets[4] - 40, offsets[4] - 120, 0]  # back 40, then 80 more


def test_a_list_that_keeps_moving_ends_the_walk_with_a_retryable_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(airflow, "MAX_STEPS_BACK", 2)
    fake = FakeAirflow()
    made = fake.add(300)
    fake.before_list[5] = lambda: [fake.delete(name) for name in made[:180]]
    with pytest.raises(ListMoved) as raised:
        walk(fake)
    assert raised.value.retryable
