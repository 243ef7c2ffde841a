"""A seeded, realistic e-commerce clickstream: the reference pipeline's input.

Users open sessions and browse products; some add to cart, fewer buy. Each event is JSON:

    {"event_id": 17, "user_id": "u0042", "session_id": "s0042-3", "event_type": "view",
     "product_id": "p117", "category": "books", "price_cents": 1999,
     "event_time": "2024-05-01T12:03:07.250Z"}

Events are listed in the order they reach the broker (arrival order), and each event's time lags
its arrival by up to `max_lateness_s` (mobile clients buffering, retries): the feed is out of order
in event time, but never by more than `max_lateness_s` behind anything sent before it — so a
watermark delay larger than that drops nothing and every event is counted. The same seed always
gives the same feed.

`end_of_stream_marker` builds the record that closes the stream: an event far enough past the last
event time that the watermark passes every window, so an availableNow query emits them all.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

CATEGORIES = {
    "books": (499, 4999), "electronics": (1999, 89999), "home": (899, 24999),
    "toys": (599, 7999), "grocery": (149, 2999), "fashion": (1299, 19999),
}
EVENT_TYPES = ("view", "add_to_cart", "purchase")
END_OF_STREAM = "end_of_stream"
START_TIME = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@dataclass(frozen=True, kw_only=True)
class ClickEvent:
    event_id: int
    user_id: str
    session_id: str
    event_type: str
    product_id: str
    category: str
    price_cents: int
    event_time: str  # ISO 8601, UTC, millisecond precision

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


def iso_ms(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_iso_ms(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def generate_events(count: int, *, seed: int = 7, duration_s: int = 1800,
                    max_lateness_s: float = 90.0, users: int = 400,
                    products: int = 250) -> list[ClickEvent]:
    """`count` events over `duration_s` seconds of arrival time, in arrival order."""
    rng = random.Random(seed)
    catalog = []
    for p in range(products):
        category = rng.choice(list(CATEGORIES))
        low, high = CATEGORIES[category]
        catalog.append((f"p{p:03d}", category, rng.randint(low, high) // 10 * 10 + 9))
    # Traffic rises and falls over the period (a lunch-time peak), so windows differ.
    arrivals = sorted(duration_s * rng.betavariate(2.2, 2.0) for _ in range(count))
    sessions: dict[str, tuple[str, int]] = {}
    events = []
    for event_id, arrival_s in enumerate(arrivals):
        user = f"u{int((rng.paretovariate(1.2) - 1) * 40) % users:04d}"
        session, n = sessions.get(user, (f"s{user[1:]}-0", 0))
        if rng.random() < 0.08:  # a new session
            session = f"s{user[1:]}-{int(session.rsplit('-', 1)[1]) + 1}"
        sessions[user] = (session, n + 1)
        product_id, category, price = catalog[int(rng.triangular(0, products - 1, 0))]
        roll = rng.random()
        event_type = "purchase" if roll < 0.04 else "add_to_cart" if roll < 0.16 else "view"
        lateness_s = rng.uniform(0, max_lateness_s) if rng.random() < 0.15 else rng.uniform(0, 2)
        event_time = START_TIME + timedelta(seconds=max(0.0, arrival_s - lateness_s))
        events.append(ClickEvent(event_id=event_id, user_id=user, session_id=session,
                                 event_type=event_type, product_id=product_id, category=category,
                                 price_cents=price, event_time=iso_ms(event_time)))
    return events


def end_of_stream_marker(events: list[ClickEvent], *, event_id: int, past_s: int) -> ClickEvent:
    """An event `past_s` seconds after the latest event time: it moves the watermark past every
    window of the feed. Aggregations must drop it (its event_type is END_OF_STREAM)."""
    last = max(parse_iso_ms(e.event_time) for e in events) if events else START_TIME
    return ClickEvent(event_id=event_id, user_id="-", session_id="-", event_type=END_OF_STREAM,
                      product_id="-", category="-", price_cents=0,
                      event_time=iso_ms(last + timedelta(seconds=past_s)))
