"""The console's overview of a ZooKeeper-mode cluster: every broker with its rack and the
controller, and the partitions that need attention once a broker is gone."""

from __future__ import annotations

import re

import pytest
from console_helpers import ConsoleProcess, get

from logbroker.testing import wait_for


def card(page: str, name: str) -> int:
    return int(re.search(rf'id="{name}"><div class="num">(\d+)<', page).group(1))


@pytest.mark.logbroker_cluster(brokers=3, **{"replica.lag.time.max.ms": "2000",
                                             "broker.rack": "rack-a"})
def test_overview_shows_racks_and_under_replicated_and_under_min_isr_partitions(logbroker_cluster):
    cluster = logbroker_cluster
    cluster.create_topic("payments", partitions=2, replication_factor=3,
                         config={"min.insync.replicas": "3"})
    with ConsoleProcess(cluster.bootstrap) as console:
        # The console's consumer looks up its group coordinator, which creates
        # __consumer_offsets on a new cluster: its partitions have no leader for a moment.
        page = wait_for(lambda: (lambda p: p if card(p, "offline") == 0 else None)(
            get(console.url + "/")[1]), timeout_s=30, what="a healthy overview")
        rows = re.findall(r"<tr><td>(\d+)</td><td>[^<]+</td><td>([^<]+)</td>", page)
        assert rows == [("1", "rack-a"), ("2", "rack-a"), ("3", "rack-a")]
        assert page.count('<span class="badge">controller</span>') == 1
        assert (card(page, "under-replicated"), card(page, "under-min-isr"),
                card(page, "offline")) == (0, 0, 0)

        victim = next(b for b in (1, 2, 3) if b != cluster.controller())
        cluster.kill(victim)
        for partition in (0, 1):
            cluster.wait_for_isr("payments", partition, size=2, excludes={victim})
        page = wait_for(lambda: (lambda p: p if p.count("ISR below min.insync.replicas") >= 2
                                 else None)(get(console.url + "/")[1]),
                        timeout_s=30, what="the overview to see the shrunk ISRs")
        # (__consumer_offsets has one replica here: its partitions on the victim are offline.)
        problems = re.findall(r'<td><a href="/topics/payments\?tab=partitions">payments</a></td>'
                              r'<td>(\d)</td><td class="\w+">([^<]+)</td>', page)
        assert sorted(problems) == [("0", "ISR below min.insync.replicas"),
                                    ("0", "under-replicated"),
                                    ("1", "ISR below min.insync.replicas"),
                                    ("1", "under-replicated")]
        assert card(page, "under-min-isr") >= 2
        # Each broker learns the new ISRs from the controller on its own (UpdateMetadata), and
        # the console's next Metadata request may go to one that has not yet: wait for it too.
        page = wait_for(lambda: (lambda p: p if p.count('<td class="warn">') == 2 else None)(
            get(console.url + "/topics/payments?tab=partitions")[1]),
            timeout_s=30, what="the partitions tab to highlight the two shrunk ISRs")
