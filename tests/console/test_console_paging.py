"""Paging through a topic in the message browser: every record once, newest first or forward,
with and without a filter — the pure rules (paging.py) and the pages of a real console."""

from __future__ import annotations

import html
import re

import pytest
from console_helpers import SEED_PARTITIONS, SEED_PER_PARTITION, ConsoleProcess, get

from logbroker.webconsole import paging
from logbroker.webconsole.model import Message

ROW = re.compile(r'<tr data-offset="(\d+)" data-partition="(\d+)">')


def message(p: int, offset: int, ts: int) -> Message:
    return Message(p, offset, ts, "CreateTime", None, b"v", ())


def test_newest_first_cursor_keeps_what_the_merge_cut():
    ranges = {0: (8, 10), 1: (3, 5)}
    found = {0: [message(0, 8, 80), message(0, 9, 90)], 1: [message(1, 3, 30), message(1, 4, 40)]}
    shown = (message(0, 9, 90), message(0, 8, 80))
    cursor = paging.next_cursor(newest=True, ranges=ranges, found=found, shown=shown,
                                reached={0: 10, 1: 5}, low={0: 0, 1: 0}, high={0: 10, 1: 5})
    assert cursor == {0: 8, 1: 5}
    assert paging.ranges_for("newest", partitions=[0, 1], low={0: 0, 1: 0}, high={0: 10, 1: 5},
                             scan=2, cursor=cursor) == {0: (6, 8), 1: (3, 5)}


def test_forward_cursor_starts_after_the_last_shown_and_ends_at_the_log_end():
    ranges = {0: (0, 2)}
    found = {0: [message(0, 0, 1), message(0, 1, 2)]}
    assert paging.next_cursor(newest=False, ranges=ranges, found=found, shown=found[0][:1],
                              reached={0: 2}, low={0: 0}, high={0: 5}) == {0: 1}
    assert paging.next_cursor(newest=False, ranges=ranges, found=found, shown=tuple(found[0]),
                              reached={0: 2}, low={0: 0}, high={0: 2}) is None


def test_cursor_text_round_trips_and_rejects_garbage():
    assert paging.parse_cursor(paging.format_cursor({1: 98, 0: 120})) == {0: 120, 1: 98}
    with pytest.raises(ValueError):
        paging.parse_cursor("0-120")


def pages(console, first: str) -> list[tuple[int, int]]:
    """Every (partition, offset) shown, following the next-page links to the end."""
    seen, url = [], first
    for _ in range(100):
        status, body = get(console.url + url)
        assert status == 200
        seen += [(int(p), int(o)) for o, p in ROW.findall(body)]
        link = re.search(r'<a href="([^"]+)"[^>]*id="next-page"', body)
        if link is None:
            assert 'id="no-more"' in body
            return seen
        url = html.unescape(link.group(1))
    raise AssertionError("more than 100 pages")


@pytest.mark.parametrize("query", ["start=newest&limit=7", "start=oldest&limit=11",
                                   "start=offset&offset=5&partition=1&limit=10"])
def test_pages_show_every_record_once(seeded_broker, query):
    bootstrap, topic, _ = seeded_broker
    with ConsoleProcess(bootstrap) as console:
        seen = pages(console, f"/topics/{topic}/messages?{query}")
    assert len(seen) == len(set(seen))
    if "partition=1" in query:
        assert seen == [(1, o) for o in range(5, SEED_PER_PARTITION)]
    else:
        assert sorted(seen) == [(p, o) for p in range(SEED_PARTITIONS)
                                for o in range(SEED_PER_PARTITION)]
    if "oldest" in query:  # forward: each partition's offsets in order
        for p in range(SEED_PARTITIONS):
            offsets = [o for q, o in seen if q == p]
            assert offsets == sorted(offsets)


def test_filtered_pages_show_every_match_once(seeded_broker):
    bootstrap, topic, _ = seeded_broker
    with ConsoleProcess(bootstrap) as console:
        seen = pages(console, f"/topics/{topic}/messages?start=newest&limit=5"
                              f"&filter=%22qty%22%3A+1%7D")  # "qty": 1}
    expected = [(p, o) for p in range(SEED_PARTITIONS) for o in range(SEED_PER_PARTITION)
                if o % 5 == 0]
    assert sorted(seen) == expected and len(seen) == len(set(seen))
