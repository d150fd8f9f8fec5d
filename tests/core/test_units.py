"""Timestamps as every front end shows them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from ragdesk.core.units import shown_time


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.skipif(not hasattr(time, "tzset"), reason="time.tzset is Unix-only")
def test_a_stored_utc_time_reads_in_local_time_to_the_minute(berlin: None) -> None:
    # the catalog stores UTC; a person in Berlin (UTC+1 in December) reads 14:16
    assert shown_time("2026-12-04T13:16:27+00:00") == "2026-12-04 14:16"
    assert shown_time("2026-07-04T13:16:27+00:00") == "2026-07-04 15:16"  # summer time


def test_a_time_without_zone_or_text_that_is_none_is_kept() -> None:
    assert shown_time("2026-12-04T13:16:27") == "2026-12-04 13:16"
    assert shown_time("yesterday") == "yesterday"
