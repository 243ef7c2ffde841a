"""A ReplicaManager over real logs on disk, for the tests that drive one directly."""

from __future__ import annotations

import pytest

from logbroker.clock import SystemClock
from logbroker.metadata.model import PartitionState
from logbroker.replication.replica_manager import ReplicaManager
from logbroker.storage.log_config import LogConfig
from logbroker.storage.log_manager import LogManager
from replica_managers import TP


@pytest.fixture
def leader_of(tmp_path):
    """Makes the ReplicaManager of broker 1, leading TP over a real log in tmp_path."""
    log_managers = []

    def make(*, flush_before_ack: bool = False, isr=(1,), replicas=(1,),
             leader_epoch: int = 0) -> ReplicaManager:
        clock = SystemClock()
        config = LogConfig.defaults().with_overrides({"flush.before.ack": flush_before_ack})
        log_manager = LogManager([tmp_path / "data"], default_config=config, clock=clock, broker_id=1)
        log_manager.startup()
        log_managers.append(log_manager)
        manager = ReplicaManager(broker_id=1, log_manager=log_manager, clock=clock)
        manager.become_leader(TP, PartitionState(1, leader_epoch, isr), replicas, config=config, topic_id=None)
        return manager

    yield make
    for log_manager in log_managers:
        log_manager.shutdown()
