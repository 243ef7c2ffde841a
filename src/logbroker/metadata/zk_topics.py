"""Topics in ZooKeeper: Kafka's `/brokers/topics/<topic>` (topic id and replica assignment,
with ongoing reassignments), its creation, partition addition, deletion and reassignment steps.

Who writes what (architecture.md §5):
- Any broker may create a topic or add partitions (Kafka's AdminZkClient does the same): the
  controller learns of new topics and partitions by its watches and elects their leaders. A
  topic created on the controller is written in a fenced multi().
- Deletion is requested with `/admin/delete_topics/<topic>` and carried out by the controller
  (`delete_topic`, one fenced multi() over the topic's znodes).
- Assignment changes and reassignment steps are the controller's, fenced and conditional on the
  topic znode's version (StaleStateError when it moved).
- A topic without an id (written by a pre-2.8 tool) gets one from whoever reads it first, with a
  setData conditional on the version read, so every broker agrees on it.

Every method blocks on ZooKeeper round trips: call them from a thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from logbroker.errors import (
    ReassignmentInProgressError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from logbroker.metadata import zk_data as zk
from logbroker.metadata.model import PartitionState, TopicInfo, new_topic_id
from logbroker.metadata.zk_controller import ZkController
from logbroker.metadata.zk_session import StaleStateError, Watch, raise_first_error
from logbroker.types import TopicPartition


class ZkTopics(ZkController):
    """Topic znodes: reading, creating, extending, reassigning and deleting; a part of
    ZooKeeperMetadataStore."""

    def topics(self) -> dict[str, TopicInfo]:
        with self._errors():
            names = sorted(self._client.get_children(zk.TOPICS))
            pending = {n: (self._client.get_async(zk.topic_path(n)),
                           self._client.get_async(zk.config_path("topics", n))) for n in names}
            topics = {}
            for name, (topic_result, config_result) in pending.items():
                info = self._topic_from_results(name, topic_result, config_result)
                if info is not None:
                    topics[name] = info
            return topics

    def topic(self, name: str) -> TopicInfo | None:
        with self._errors():
            return self._topic_from_results(name, self._client.get_async(zk.topic_path(name)),
                                            self._client.get_async(zk.config_path("topics", name)))

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self.topics().values() if t.topic_id == topic_id), None)

    def _topic_from_results(self, name: str, topic_result, config_result) -> TopicInfo | None:
        try:
            data, stat = topic_result.get()
        except NoNodeError:
            return None
        if not data:  # not a topic Kafka wrote (a bare path someone created)
            return None
        try:
            configs = zk.decode_config(config_result.get()[0])
        except NoNodeError:
            configs = {}
        topic_id, assignment = zk.decode_topic(data)
        if topic_id is None:
            topic_id = self._assign_topic_id(name, assignment, stat.version)
        return TopicInfo(name, topic_id, assignment, configs)

    def _assign_topic_id(self, name: str, assignment: dict[int, tuple[int, ...]], version: int) -> uuid.UUID:
        # A topic created by a pre-2.8 tool has no id; Kafka's controller gives it one. Whoever
        # reads it first writes one, conditionally, so all brokers agree on it.
        topic_id = new_topic_id()
        try:
            self._client.set(zk.topic_path(name), zk.encode_topic(topic_id, assignment), version=version)
            return topic_id
        except BadVersionError:
            written, _ = zk.decode_topic(self._client.get(zk.topic_path(name))[0])
            return written or self._assign_topic_id(name, assignment, self._client.exists(zk.topic_path(name)).version)

    def create_topic(self, info: TopicInfo) -> None:
        """Write the topic's config and assignment in one multi (fenced when this broker is
        controller). Raises TopicAlreadyExistsError."""
        with self._errors():
            fenced = self.is_controller
            txn = self._controller_txn() if fenced else self._client.transaction()
            config = zk.config_path("topics", info.name)
            if self._client.exists(config) is None:
                txn.create(config, zk.encode_config(info.configs))
            else:  # left over from a deleted topic, or set ahead of the topic
                txn.set_data(config, zk.encode_config(info.configs))
            txn.create(zk.topic_path(info.name), zk.encode_topic(info.topic_id, info.assignment))
            results = self._commit(txn, fenced=fenced)
            if any(isinstance(r, NodeExistsError) for r in results):
                raise TopicAlreadyExistsError(f"Topic '{info.name}' already exists.")
            raise_first_error(results)

    def _topic_znode(self, name: str):
        """(data, stat) of `/brokers/topics/<topic>`; UnknownTopicOrPartitionError if absent."""
        try:
            return self._client.get(zk.topic_path(name))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.") from None

    def set_assignment(self, name: str, assignment: dict[int, tuple[int, ...]]) -> None:
        """Replace a topic's replica assignment (partition addition, reassignment); controller only."""
        with self._errors():
            data, stat = self._topic_znode(name)
            topic_id, _ = zk.decode_topic(data)
            txn = self._controller_txn()
            txn.set_data(zk.topic_path(name), zk.encode_topic(topic_id or new_topic_id(), assignment),
                         version=stat.version)
            results = self._commit(txn, fenced=True)
            if isinstance(results[1], BadVersionError):
                raise StaleStateError(f"Topic '{name}' changed while its assignment was being set.")
            raise_first_error(results)

    def add_partitions(self, name: str, added: dict[int, tuple[int, ...]], *, current_count: int) -> None:
        """Any broker's write of new partitions into `/brokers/topics/<topic>` (Kafka's
        AdminZkClient.addPartitions): a setData conditional on the version read, made only while
        the topic still has `current_count` partitions. The controller's watch on the topic gives
        them states. Raises StaleStateError when the topic changed meanwhile."""
        with self._errors():
            data, stat = self._topic_znode(name)
            topic = zk.decode_topic_reassignment(name, data, stat.version)
            topic_id, assignment = topic.topic_id, topic.assignment
            if topic.adding or topic.removing:
                raise ReassignmentInProgressError(
                    f"Topic '{name}' has a partition reassignment in progress; add partitions once "
                    f"it completes (logbroker reassign-partitions --verify).")
            if len(assignment) != current_count:
                raise StaleStateError(f"Topic '{name}' has {len(assignment)} partitions now, not "
                                      f"{current_count}; describe it again and retry.")
            try:
                self._client.set(zk.topic_path(name),
                                 zk.encode_topic(topic_id or new_topic_id(), {**assignment, **added}),
                                 version=stat.version)
            except BadVersionError:
                raise StaleStateError(f"Topic '{name}' changed while partitions were being added; "
                                      "retry.") from None

    def request_topic_deletion(self, name: str) -> None:
        """Mark a topic for deletion (`/admin/delete_topics/<topic>`); the controller deletes it."""
        with self._errors():
            if self._client.exists(zk.topic_path(name)) is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            with contextlib.suppress(NodeExistsError):
                self._client.create(zk.delete_topic_path(name))

    def topics_to_delete(self) -> list[str]:
        with self._errors():
            return sorted(self._client.get_children(zk.DELETE_TOPICS))

    def delete_topic(self, name: str) -> TopicInfo:
        """Remove the topic's znodes (partition states, assignment, config, deletion mark) in one
        fenced multi; controller only. Returns what was deleted."""
        with self._errors():
            info = self.topic(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            txn = self._controller_txn()
            for path in reversed(self._subtree(zk.partitions_path(name))):
                txn.delete(path)
            txn.delete(zk.topic_path(name))
            if self._client.exists(zk.config_path("topics", name)) is not None:
                txn.delete(zk.config_path("topics", name))
            if self._client.exists(zk.delete_topic_path(name)) is not None:
                txn.delete(zk.delete_topic_path(name))
            results = self._commit(txn, fenced=True)
            if any(isinstance(r, NotEmptyError) for r in results):
                raise StaleStateError(f"Topic '{name}' changed while being deleted; retry.")
            raise_first_error(results)
            return info

    def _subtree(self, path: str) -> list[str]:
        """`path` and everything under it, parents first ([] if it does not exist)."""
        try:
            children = self._client.get_children(path)
        except NoNodeError:
            return []
        paths = [path]
        for child in children:
            paths += self._subtree(f"{path}/{child}")
        return paths

    # -- partition reassignment (server/partition_reassignment.py drives it) --------------------
    def topic_reassignment(self, name: str) -> zk.TopicReassignment | None:
        """A topic's assignment with its ongoing reassignments (None if the topic is gone)."""
        with self._errors():
            try:
                data, stat = self._client.get(zk.topic_path(name))
            except NoNodeError:
                return None
            return zk.decode_topic_reassignment(name, data, stat.version)

    def write_reassignment(self, reassignment: zk.TopicReassignment,
                           states: dict[TopicPartition, PartitionState], *,
                           expected_versions: dict[TopicPartition, int]) -> None:
        """A reassignment step of the controller: the topic znode (assignment, adding and removing
        replicas) and the partitions' new states, in one fenced multi conditional on the topic
        version and the state versions they were decided on; StaleStateError when one moved."""
        with self._errors():
            epoch = self._controller_epoch
            txn = self._controller_txn()
            txn.set_data(zk.topic_path(reassignment.name),
                         zk.encode_topic(reassignment.topic_id or new_topic_id(), reassignment.assignment,
                                         adding=reassignment.adding, removing=reassignment.removing),
                         version=reassignment.zk_version)
            for tp, state in sorted(states.items()):
                txn.set_data(zk.partition_state_path(tp),
                             zk.encode_partition_state(dataclasses.replace(state, controller_epoch=epoch)),
                             version=expected_versions[tp])
            results = self._commit(txn, fenced=True)
            if any(isinstance(r, (BadVersionError, NoNodeError)) for r in results[1:]):
                raise StaleStateError(f"Topic '{reassignment.name}' or a partition state changed "
                                      "while its reassignment was being written.")
            raise_first_error(results)

    def watch_topics(self, callback: Callable[[list[str]], None]) -> Watch:
        return self._children_watch(zk.TOPICS, lambda c: callback(sorted(c)))

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Watch:
        return self._children_watch(zk.DELETE_TOPICS, lambda c: callback(sorted(c)))

    def watch_topic(self, name: str, callback: Callable[[bool], None]) -> Watch:
        """`callback(exists)` whenever `/brokers/topics/<topic>` is written (partitions added)."""
        return self._data_watch(zk.topic_path(name), lambda data, stat: stat is not None, callback)
