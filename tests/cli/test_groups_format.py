"""kafka-consumer-groups.sh's tables and argument formats, as `group_views` builds them."""

from __future__ import annotations

import pytest

from logbroker.cli import group_views as views


def test_offsets_table_pads_like_kafka_and_prints_missing_values_as_dashes():
    rows = [views.OffsetRow(group="g", topic="orders", partition=0, current_offset=4,
                            log_end_offset=10, consumer_id="c-1", host="/127.0.0.1",
                            client_id="app"),
            views.OffsetRow(group="g", topic="orders", partition=1, current_offset=None,
                            log_end_offset=10, consumer_id=None, host=None, client_id=None)]
    assert views.offsets_lines(rows) == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG"
        "             CONSUMER-ID     HOST            CLIENT-ID",
        "g               orders          0          4               10              6"
        "               c-1             /127.0.0.1      app",
        "g               orders          1          -               10              -"
        "               -               -               -",
    ]


def test_columns_widen_to_the_longest_value():
    topic = "a-topic-name-longer-than-fifteen"
    lines = views.reset_plan_lines({"g": {(topic, 1): 7, (topic, 0): 3}})
    assert lines == ["",
                     f"GROUP           {'TOPIC'.ljust(len(topic))} PARTITION  NEW-OFFSET",
                     f"g               {topic} 0          3",
                     f"g               {topic} 1          7"]


def test_members_table_shows_group_instance_id_only_for_static_members():
    dynamic = views.MemberRow(group="g", consumer_id="c-1", group_instance_id="", host="/h",
                              client_id="app", partitions=3)
    assert "GROUP-INSTANCE-ID" not in views.members_lines([dynamic])[1]
    static = views.MemberRow(group="g", consumer_id="c-2", group_instance_id="i-1", host="/h",
                             client_id="app", partitions=3)
    assert views.members_lines([dynamic, static])[1].split() == [
        "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]


def test_list_with_state_is_a_table():
    groups = [views.GroupListing("g1", "Stable"), views.GroupListing("g2", "Empty")]
    assert views.list_lines(groups, with_state=False) == ["g1", "g2"]
    assert [line.split() for line in views.list_lines(groups, with_state=True)] == [
        ["GROUP", "STATE"], ["g1", "Stable"], ["g2", "Empty"]]


def test_list_with_type_puts_kafkas_type_before_the_state():
    groups = [views.GroupListing("g1", "Stable", "Consumer"), views.GroupListing("g2", "Empty", "Classic")]
    assert [line.split() for line in views.list_lines(groups, with_state=False, with_type=True)] == [
        ["GROUP", "TYPE"], ["g1", "Consumer"], ["g2", "Classic"]]
    assert [line.split() for line in views.list_lines(groups, with_state=True, with_type=True)] == [
        ["GROUP", "TYPE", "STATE"], ["g1", "Consumer", "Stable"], ["g2", "Classic", "Empty"]]
    assert views.parse_types("CONSUMER") == {"Consumer"}
    assert views.parse_types("share") == {"Share"}  # KIP-932 share groups
    with pytest.raises(ValueError, match="Invalid types list 'streams'"):
        views.parse_types("streams")


def test_state_filter_takes_kafka_names_in_any_case():
    assert views.parse_states("stable,EMPTY") == {"Stable", "Empty"}
    with pytest.raises(ValueError, match="Invalid state list 'Running'"):
        views.parse_states("Running")


@pytest.mark.parametrize(("text", "epoch_ms"), [
    ("2024-01-01T00:00:05.500", 1_704_067_205_500),
    ("2024-01-01T00:00:05", 1_704_067_205_000),
    ("2024-01-01T00:00:05.500Z", 1_704_067_205_500),
    ("2024-01-01T01:00:05.500+01:00", 1_704_067_205_500),
    ("2023-12-31T19:00:05.500-05:00", 1_704_067_205_500),
])
def test_datetime_without_a_zone_is_utc(text, epoch_ms):
    assert views.parse_datetime_ms(text) == epoch_ms


@pytest.mark.parametrize(("text", "ms"), [
    ("PT1H", 3_600_000), ("P1DT2H3M4S", 93_784_000), ("PT0.5S", 500), ("PT15M", 900_000),
    ("-PT1S", -1000),
])
def test_duration_is_read_as_java_reads_it(text, ms):
    assert views.parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["1H", "P", "PT", "yesterday", "2024-01-01"])
def test_bad_durations_and_datetimes_are_refused(text):
    with pytest.raises(ValueError):
        views.parse_duration_ms(text)
    with pytest.raises(ValueError):
        views.parse_datetime_ms(text)
