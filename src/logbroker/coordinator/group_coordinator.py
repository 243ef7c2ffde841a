"""The group coordinator: classic consumer-group membership and committed offsets.

Kafka's GroupCoordinator (the pre-KIP-848 one). A group lives in the `__consumer_offsets`
partition `partition_for(group_id)`; the leader of that partition is the group's coordinator, and
every change that must survive a restart (offsets, and the group's generation, leader, members and
assignment after each SyncGroup) is appended to that partition before the client hears of it.
Leadership of those partitions moves between brokers in a cluster, and the coordinator follows it
(Kafka's onElection / onResignation, through ReplicaManager's leadership listeners): a partition
this broker comes to lead is replayed in a worker thread (COORDINATOR_LOAD_IN_PROGRESS until then),
one it stops leading has its groups dropped and their parked requests answered NOT_COORDINATOR
(coordinator/group_loader.py).

Why futures and timers: JoinGroup and SyncGroup are long polls. A JoinGroup parks on its member's
`join_future` until every known member has rejoined or the rebalance timeout (the largest of the
members') expires — a new group first waits group.initial.rebalance.delay.ms, extended while new
members keep arriving, up to the rebalance timeout, so the first consumers of a job land in one
generation. A follower's SyncGroup parks until the leader's SyncGroup brings the assignment. Each
member has one session timer (loop.call_later) rearmed by every heartbeat, join and sync; when it
fires the member is removed and the group rebalances. A member with a JoinGroup or SyncGroup
parked here is alive by definition and is not expired.

Everything runs on the event loop; state changes between awaits are atomic, and code after an
await re-checks the group's state and generation, as Kafka re-checks under the group lock.
Errors are raised as KafkaError; the API modules turn them into response codes.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable

from logbroker.clock import Clock
from logbroker.coordinator.group_loader import GroupLoader
from logbroker.coordinator.group_metadata import GroupMetadata, GroupState, MemberMetadata
from logbroker.coordinator.offsets_log import COMMIT_TIMEOUT_MS, build_records, map_append_error
from logbroker.coordinator.offsets_schema import (
    OFFSETS_TOPIC,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from logbroker.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    KafkaStorageError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    TopicAlreadyExistsError,
    UnknownMemberIdError,
)
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.coordinator.group.GroupCoordinator")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                              GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
                                              GroupState.DEAD)


class MemberIdRequired(MemberIdRequiredError):
    """MEMBER_ID_REQUIRED, carrying the member id the client must rejoin with."""

    def __init__(self, member_id: str) -> None:
        super().__init__(f"rejoin with member id {member_id}")
        self.member_id = member_id


class GroupCoordinator:
    def __init__(self, *, broker_id: int, config, replica_manager, store,
                 create_topic: Callable[..., object], clock: Clock,
                 live_brokers: Callable[[], int] | None = None) -> None:
        """`live_brokers` counts the registered brokers of a cluster; None on a single node."""
        self.broker_id = broker_id
        self.config = config
        self.replica_manager = replica_manager
        self.store = store
        self._create_topic = create_topic
        self._live_brokers = live_brokers
        self.clock = clock
        self.groups: dict[str, GroupMetadata] = {}
        self.loader = GroupLoader(install=self._install_groups, unload=self._unload_groups, clock=clock)
        self._background: set[asyncio.Task] = set()
        self._expiration_task: asyncio.Task | None = None

    # -- where groups live ----------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """The partition count of __consumer_offsets: the topic's own once it exists (as Kafka)."""
        info = self.store.topic(OFFSETS_TOPIC)
        return info.num_partitions if info else self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets if it does not exist yet (on the first FindCoordinator).

        In a cluster, as Kafka's ZooKeeper mode, with offsets.topic.replication.factor replicas,
        refused with COORDINATOR_NOT_AVAILABLE while fewer brokers are alive. A single node uses
        one replica, so the embedded default needs no configuration."""
        if self.store.topic(OFFSETS_TOPIC) is not None:
            return
        replication_factor = self.config.offsets_topic_replication_factor
        if self._live_brokers is None:
            replication_factor = 1
        elif (live := self._live_brokers()) < replication_factor:
            raise CoordinatorNotAvailableError(
                f"{live} broker(s) are alive, fewer than offsets.topic.replication.factor={replication_factor} "
                f"needs to create {OFFSETS_TOPIC}; start more brokers or lower the setting")
        try:
            self._create_topic(OFFSETS_TOPIC, num_partitions=self.config.offsets_topic_num_partitions,
                               replication_factor=replication_factor,
                               configs={"cleanup.policy": "compact", "compression.type": "producer",
                                        "segment.bytes": str(self.config.offsets_topic_segment_bytes)})
        except TopicAlreadyExistsError:
            pass  # another broker created it a moment ago; our metadata learns of it by its watch
        except KafkaStorageError as exc:  # a full or failing log dir (Kafka: the same answer)
            raise CoordinatorNotAvailableError(f"{OFFSETS_TOPIC} cannot be created: {exc}") from None

    def coordinator_partition(self, group_id: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, self.partition_for(group_id))

    def check_group(self, group_id: str | None) -> None:
        """Raise unless this broker coordinates `group_id` now."""
        if not group_id:
            raise InvalidGroupIdError("The group id is empty")
        if self.store.topic(OFFSETS_TOPIC) is None:
            raise NotCoordinatorError(f"{OFFSETS_TOPIC} does not exist yet")
        tp = self.coordinator_partition(group_id)
        partition = self.replica_manager.partitions.get(tp)
        if partition is None or not partition.is_leader:
            raise NotCoordinatorError(f"This broker does not lead {tp}, which holds group {group_id}")
        if tp.partition in self.loader.partitions.loading:
            raise CoordinatorLoadInProgressError(f"{tp} is loading; retry in a moment")
        if tp.partition not in self.loader.partitions.owned:
            raise NotCoordinatorError(f"This broker has not taken over {tp} yet, which holds group {group_id}")

    def _now(self) -> int:
        return self.clock.time_ms()

    # -- JoinGroup ------------------------------------------------------------------------------
    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], supports_skip_assignment: bool) -> dict:
        self.check_group(group_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            raise InvalidSessionTimeoutError(
                f"session timeout {session_timeout_ms} ms is outside group.min/max.session.timeout.ms")
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            group = self.groups[group_id] = GroupMetadata(group_id, current_state_timestamp_ms=self._now())
        if group.is_(DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if not group.supports_protocols(protocol_type, protocols):
            raise InconsistentGroupProtocolError(
                f"protocol type {protocol_type!r} / protocols {[p for p, _ in protocols]} do not match group {group_id}")
        kw = dict(client_id=client_id, client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
                  session_timeout_ms=session_timeout_ms, protocol_type=protocol_type, protocols=protocols)
        if not member_id:
            new_member_id = f"{group_instance_id or client_id}-{uuid.uuid4()}"
            if group_instance_id is not None:
                old_member_id = group.static_member_id(group_instance_id)
                if old_member_id is not None:
                    return await self._rejoin_static_member(group, old_member_id, new_member_id,
                                                            group_instance_id, supports_skip_assignment, **kw)
            elif require_known_member_id:
                group.pending_members.add(new_member_id)
                asyncio.get_running_loop().call_later(session_timeout_ms / 1000, self._expire_pending_member,
                                                      group, new_member_id)
                raise MemberIdRequired(new_member_id)
            return await self._add_member_and_rebalance(group, new_member_id, group_instance_id, **kw)

        if member_id in group.pending_members:
            return await self._add_member_and_rebalance(group, member_id, group_instance_id, **kw)
        if self._is_fenced(group, member_id, group_instance_id):
            raise FencedInstanceIdError(f"instance {group_instance_id} is now another member")
        member = group.members.get(member_id)
        if member is None or group.is_(EMPTY):
            raise UnknownMemberIdError(f"member {member_id} is not in group {group_id}")
        if group.is_(PREPARING):
            return await self._update_member_and_rebalance(group, member, **kw)
        if group.is_(COMPLETING):
            if member.matches(protocols):
                # The member missed our JoinGroup answer: give it again.
                return self._join_response(group, member, as_leader=member.member_id == group.leader_id)
            return await self._update_member_and_rebalance(group, member, **kw)
        # Stable
        if member.member_id == group.leader_id or not member.matches(protocols):
            return await self._update_member_and_rebalance(group, member, **kw)
        self._schedule_heartbeat(group, member)
        return self._join_response(group, member, as_leader=False)

    def _is_fenced(self, group: GroupMetadata, member_id: str, group_instance_id: str | None) -> bool:
        mapped = group.static_member_id(group_instance_id)
        return mapped is not None and mapped != member_id

    async def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str,
                                        group_instance_id: str | None, **kw) -> dict:
        member = MemberMetadata(member_id, group_instance_id, is_new=True, **kw)
        future = member.join_future = asyncio.get_running_loop().create_future()
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        self._maybe_complete_join(group)
        return await future

    async def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, *,
                                           client_id: str, client_host: str, rebalance_timeout_ms: int,
                                           session_timeout_ms: int, protocol_type: str,
                                           protocols: list[tuple[str, bytes]]) -> dict:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        if member.is_awaiting_join:
            member.join_future.set_exception(RebalanceInProgressError("superseded by a newer JoinGroup"))
        future = member.join_future = asyncio.get_running_loop().create_future()
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._maybe_complete_join(group)
        return await future

    async def _rejoin_static_member(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                    group_instance_id: str, supports_skip_assignment: bool, **kw) -> dict:
        """A static member rejoining with an empty member id takes over its old member id's
        place. In a Stable group with unchanged protocols there is no rebalance: it gets the
        current generation and, at SyncGroup, its old assignment."""
        old = group.members[old_member_id]
        protocols_unchanged = old.matches(kw["protocols"]) and old.protocol_type == kw["protocol_type"]
        self._cancel_heartbeat(old)
        for fut in (old.join_future, old.sync_future):
            if fut is not None and not fut.done():
                fut.set_exception(FencedInstanceIdError(f"instance {group_instance_id} rejoined as {new_member_id}"))
        old.join_future = old.sync_future = None
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        if group.is_(STABLE) and protocols_unchanged:
            member.client_id, member.client_host = kw["client_id"], kw["client_host"]
            member.session_timeout_ms = kw["session_timeout_ms"]
            member.rebalance_timeout_ms = kw["rebalance_timeout_ms"]
            self._schedule_heartbeat(group, member)
            try:
                await self._store_group(group)
            except KafkaError:
                if group.members.get(new_member_id) is member:
                    group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                raise
            is_leader = group.leader_id == new_member_id
            log.info("Static member %s of group %s rejoined as %s without a rebalance",
                     group_instance_id, group.group_id, new_member_id)
            response = self._join_response(group, member, as_leader=is_leader and supports_skip_assignment)
            response["skip_assignment"] = is_leader and supports_skip_assignment
            return response
        return await self._update_member_and_rebalance(group, member, **kw)

    def _join_response(self, group: GroupMetadata, member: MemberMetadata, *, as_leader: bool) -> dict:
        members = []
        if as_leader and group.protocol_name is not None:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol_name)} for m in group.members.values()]
        return {"error_code": 0, "generation_id": group.generation_id, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "leader": group.leader_id or "",
                "member_id": member.member_id, "members": members, "skip_assignment": False}

    # -- rebalances -----------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(COMPLETING):
            self._propagate_sync_error(group, RebalanceInProgressError("the group is rebalancing"))
        initial = group.is_(EMPTY)
        group.transition_to(PREPARING, self._now())
        self._cancel_join_timer(group)
        loop = asyncio.get_running_loop()
        if initial:
            delay_ms = self.config.group_initial_rebalance_delay_ms
            remaining_ms = max(group.max_rebalance_timeout_ms() - delay_ms, 0)
            group.new_member_added = False
            group.initial_join_delay = True
            group.join_timer = loop.call_later(delay_ms / 1000, self._initial_delay_expired, group,
                                               delay_ms, remaining_ms)
        else:
            group.join_timer = loop.call_later(group.max_rebalance_timeout_ms() / 1000, self._complete_join, group)
        log.info("Preparing to rebalance group %s in state PreparingRebalance with old generation %d (reason: %s)",
                 group.group_id, group.generation_id, reason)

    def _initial_delay_expired(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        group.join_timer = None
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            next_delay = min(delay_ms, remaining_ms)
            group.join_timer = asyncio.get_running_loop().call_later(
                next_delay / 1000, self._initial_delay_expired, group, delay_ms, max(remaining_ms - delay_ms, 0))
            return
        group.initial_join_delay = False
        self._complete_join(group)

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_join_delay = False

    def _maybe_complete_join(self, group: GroupMetadata) -> None:
        if group.is_(PREPARING) and not group.initial_join_delay and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, start the next
        generation and answer every parked JoinGroup (the leader with all members' metadata)."""
        self._cancel_join_timer(group)
        if not group.is_(PREPARING):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("Member %s of group %s did not rejoin in time; removing it", member.member_id, group.group_id)
                self._cancel_heartbeat(member)
                group.remove(member.member_id)
        if group.leader_id is not None and not group.members[group.leader_id].is_awaiting_join:
            joined = [m.member_id for m in group.members.values() if m.is_awaiting_join]
            if joined:
                group.leader_id = joined[0]
        group.generation_id += 1
        if group.is_empty:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(EMPTY, self._now())
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
            self._store_group_in_background(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(COMPLETING, self._now())
        log.info("Stabilized group %s generation %d with %d member(s)", group.group_id,
                 group.generation_id, len(group.members))
        for member in group.members.values():
            if member.is_awaiting_join:
                member.join_future.set_result(
                    self._join_response(group, member, as_leader=member.member_id == group.leader_id))
            member.join_future = None
            member.is_new = False
            self._schedule_heartbeat(group, member)

    def _propagate_sync_error(self, group: GroupMetadata, error: KafkaError) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.is_awaiting_sync:
                member.sync_future.set_exception(error)
            member.sync_future = None

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self._cancel_heartbeat(member)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_exception(UnknownMemberIdError(f"member {member.member_id} left: {reason}"))
        member.join_future = member.sync_future = None
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_(PREPARING):
            self._maybe_complete_join(group)

    # -- sessions -------------------------------------------------------------------------------
    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._cancel_heartbeat(member)
        member.heartbeat_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._heartbeat_expired, group, member)

    @staticmethod
    def _cancel_heartbeat(member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member or self.groups.get(group.group_id) is not group:
            return
        if member.is_awaiting_join or member.is_awaiting_sync:
            self._schedule_heartbeat(group, member)
            return
        log.info("Member %s in group %s has failed (no heartbeat for %d ms), removing it from the group",
                 member.member_id, group.group_id, member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, "session timeout expired")

    def _expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)

    # -- SyncGroup / Heartbeat / LeaveGroup -----------------------------------------------------
    def _member_for(self, group_id: str, member_id: str, group_instance_id: str | None,
                    generation_id: int) -> tuple[GroupMetadata, MemberMetadata]:
        """The checks SyncGroup, Heartbeat and OffsetCommit share, in Kafka's order."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id} does not exist")
        if group.is_(DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if self._is_fenced(group, member_id, group_instance_id):
            raise FencedInstanceIdError(f"instance {group_instance_id} is now another member")
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id} is not in group {group_id}")
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group_id}'s current {group.generation_id}")
        return group, member

    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None, assignments: dict[str, bytes]) -> dict:
        group, member = self._member_for(group_id, member_id, group_instance_id, generation_id)
        if protocol_type is not None and protocol_type != group.protocol_type:
            raise InconsistentGroupProtocolError(f"protocol type {protocol_type} is not {group.protocol_type}")
        if protocol_name is not None and protocol_name != group.protocol_name:
            raise InconsistentGroupProtocolError(f"protocol {protocol_name} is not {group.protocol_name}")
        if group.is_(EMPTY):
            raise UnknownMemberIdError(f"group {group_id} is empty")
        if group.is_(PREPARING):
            raise RebalanceInProgressError(f"group {group_id} is rebalancing")
        if group.is_(STABLE):
            self._schedule_heartbeat(group, member)
            return self._sync_response(group, member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored.
        if member.is_awaiting_sync:
            member.sync_future.set_exception(RebalanceInProgressError("superseded by a newer SyncGroup"))
        member.sync_future = future = asyncio.get_running_loop().create_future()
        if member_id == group.leader_id:
            generation = group.generation_id
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            try:
                await self._store_group(group, assignments=full)
                error = None
            except KafkaError as exc:
                error = exc
            if group.is_(COMPLETING) and group.generation_id == generation:
                if error is not None:
                    self._propagate_sync_error(group, error)
                    self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
                else:
                    for m in group.members.values():
                        m.assignment = full.get(m.member_id, b"")
                        if m.is_awaiting_sync:
                            m.sync_future.set_result(self._sync_response(group, m.assignment))
                        m.sync_future = None
                        self._schedule_heartbeat(group, m)
                    group.transition_to(STABLE, self._now())
                    log.info("Assignment received from leader %s for group %s for generation %d",
                             member_id, group_id, generation)
        return await future

    @staticmethod
    def _sync_response(group: GroupMetadata, assignment: bytes) -> dict:
        return {"error_code": 0, "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "assignment": assignment}

    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> None:
        group, member = self._member_for(group_id, member_id, group_instance_id, generation_id)
        if group.is_(EMPTY):
            raise UnknownMemberIdError(f"group {group_id} is empty")
        self._schedule_heartbeat(group, member)
        # A member whose JoinGroup is parked here is already rejoining: telling it to rejoin again
        # only matters when the answer overtakes the JoinGroup's. Kafka never answers a
        # connection's requests out of turn, but our network dispatches pipelined requests at
        # once, so a heartbeat sent after the JoinGroup is answered before it — and a client that
        # reads REBALANCE_IN_PROGRESS after its join completed (kafka-python) rejoins at once,
        # again and again. So a member awaiting its join gets NONE.
        if group.is_(PREPARING) and not member.is_awaiting_join:
            raise RebalanceInProgressError(f"group {group_id} is rebalancing")

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[KafkaError | None]:
        """Remove each (member id, group instance id); one result per member, None for success."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            return [UnknownMemberIdError(f"group {group_id} does not exist") for _ in leaving]
        if group.is_(DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        results: list[KafkaError | None] = []
        for member_id, group_instance_id in leaving:
            if group_instance_id is not None:
                mapped = group.static_member_id(group_instance_id)
                if mapped is None:
                    results.append(UnknownMemberIdError(f"no member with instance id {group_instance_id}"))
                    continue
                if member_id and mapped != member_id:
                    results.append(FencedInstanceIdError(f"instance {group_instance_id} is member {mapped}"))
                    continue
                member_id = mapped
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._maybe_complete_join(group)
                results.append(None)
                continue
            member = group.members.get(member_id)
            if member is None:
                results.append(UnknownMemberIdError(f"member {member_id} is not in group {group_id}"))
                continue
            log.info("Member %s has left group %s through explicit LeaveGroup", member_id, group_id)
            self._remove_member_and_update_group(group, member, "the member left the group")
            results.append(None)
        return results

    # -- offsets --------------------------------------------------------------------------------
    async def commit_offsets(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Store `offsets` (already validated per partition by the caller). Raises the error
        every partition gets."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise IllegalGenerationError(f"group {group_id} does not exist")
            group = self.groups[group_id] = GroupMetadata(group_id, current_state_timestamp_ms=self._now())
        if group.is_(DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if self._is_fenced(group, member_id, group_instance_id):
            raise FencedInstanceIdError(f"instance {group_instance_id} is now another member")
        if not (generation_id < 0 and group.is_(EMPTY)):
            if group.is_(COMPLETING):
                raise RebalanceInProgressError(f"group {group_id} is completing a rebalance")
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(f"member {member_id} is not in group {group_id}")
            if generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} is not group {group_id}'s current {group.generation_id}")
            self._schedule_heartbeat(group, member)
        if not offsets:
            return
        entries = [(encode_offset_commit_key(group_id, tp.topic, tp.partition), encode_offset_commit_value(value))
                   for tp, value in offsets.items()]
        await self._append(group_id, entries, for_offsets=True)
        if self.groups.get(group_id) is group:
            group.offsets.update(offsets)

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets; all of the group's when `partitions` is None."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(DEAD) else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> dict[TopicPartition, KafkaError | None]:
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        subscribed: set[str] | None = set()
        if not group.is_(EMPTY):
            if group.protocol_type != "consumer":
                raise NonEmptyGroupError(f"group {group_id} is not empty")
            subscribed = group.subscribed_topics()
        results: dict[TopicPartition, KafkaError | None] = {}
        to_delete = []
        for tp in partitions:
            if subscribed is None or tp.topic in subscribed:
                results[tp] = GroupSubscribedToTopicError(f"group {group_id} is subscribed to {tp.topic}")
            else:
                results[tp] = None
                if tp in group.offsets:
                    to_delete.append(tp)
        if to_delete:
            await self._append(group_id, [(encode_offset_commit_key(group_id, tp.topic, tp.partition), None)
                                          for tp in to_delete], for_offsets=True)
            for tp in to_delete:
                group.offsets.pop(tp, None)
        return results

    # -- listing, describing, deleting ----------------------------------------------------------
    @property
    def is_loading(self) -> bool:
        """True while any __consumer_offsets partition this broker leads is being loaded."""
        return bool(self.loader.partitions.loading)

    def owned_groups(self) -> list[GroupMetadata]:
        return [g for g in self.groups.values() if not g.is_(DEAD)]

    def describe_group(self, group_id: str) -> dict:
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return {"error_code": 0, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
                    "protocol_data": "", "members": []}
        stable = group.is_(STABLE)
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b""}
                   for m in group.members.values()]
        return {"error_code": 0, "group_id": group_id, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "", "members": members}

    async def delete_group(self, group_id: str) -> None:
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        if not group.is_(EMPTY):
            raise NonEmptyGroupError(f"group {group_id} is not empty")
        entries = [(encode_offset_commit_key(group_id, tp.topic, tp.partition), None) for tp in group.offsets]
        entries.append((encode_group_metadata_key(group_id), None))
        await self._append(group_id, entries, for_offsets=False)
        self._cancel_join_timer(group)
        group.transition_to(DEAD, self._now())
        if self.groups.get(group_id) is group:
            del self.groups[group_id]
        log.info("Deleted group %s", group_id)

    # -- persistence ----------------------------------------------------------------------------
    async def _append(self, group_id: str, entries: list[tuple[bytes, bytes | None]], *, for_offsets: bool) -> None:
        tp = self.coordinator_partition(group_id)
        results = await self.replica_manager.append_records(
            timeout_ms=COMMIT_TIMEOUT_MS, required_acks=-1, entries={tp: build_records(entries, self._now())})
        error = results[tp].error
        if error is not None:
            raise map_append_error(error, for_offsets=for_offsets)

    def _group_record(self, group: GroupMetadata, assignments: dict[str, bytes] | None) -> GroupMetadataRecord:
        members = tuple(
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                         m.session_timeout_ms,
                         m.metadata(group.protocol_name) if group.protocol_name else b"",
                         (assignments or {}).get(m.member_id, m.assignment))
            for m in group.members.values())
        return GroupMetadataRecord(group.protocol_type or "", group.generation_id, group.protocol_name,
                                   group.leader_id, group.current_state_timestamp_ms, members)

    async def _store_group(self, group: GroupMetadata, *, assignments: dict[str, bytes] | None = None) -> None:
        value = encode_group_metadata_value(self._group_record(group, assignments))
        await self._append(group.group_id, [(encode_group_metadata_key(group.group_id), value)], for_offsets=False)

    def _store_group_in_background(self, group: GroupMetadata) -> None:
        async def store() -> None:
            try:
                await self._store_group(group)
            except KafkaError as exc:
                log.warning("Failed to store metadata of group %s: %s", group.group_id, exc)
        task = asyncio.get_running_loop().create_task(store())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- following the leadership of __consumer_offsets (onElection / onResignation) -----------
    def load(self) -> None:
        """Load every __consumer_offsets partition this broker leads now (blocks on disk; call
        once, on the event loop, after leaders are elected and before the listeners open), follow
        later leadership changes (group_loader.GroupLoader), and start the offset expiration task."""
        self.replica_manager.leadership_listeners.append(self.loader.on_leadership_change)
        self.start_offset_expiration()
        for tp, partition in list(self.replica_manager.partitions.items()):
            if tp.topic == OFFSETS_TOPIC and partition.is_leader:
                self.loader.load_now(partition)

    def _install_groups(self, groups: dict[str, GroupMetadata]) -> None:
        for group_id, group in groups.items():
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)

    def _unload_groups(self, partition_index: int) -> int:
        """Drop the groups of a partition this broker no longer leads: timers cancelled, parked
        JoinGroup and SyncGroup answered NOT_COORDINATOR (the clients find the new coordinator).
        Returns how many."""
        now_ms = self._now()
        unloaded = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition_index]
        for group in unloaded:
            error = NotCoordinatorError(f"This broker no longer coordinates group {group.group_id}")
            self._cancel_join_timer(group)
            for member in group.members.values():
                self._cancel_heartbeat(member)
                for fut in (member.join_future, member.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_exception(error)
                member.join_future = member.sync_future = None
            group.transition_to(DEAD, now_ms)
            del self.groups[group.group_id]
        return len(unloaded)

    def start_offset_expiration(self) -> None:
        """Look for expired offsets every offsets.retention.check.interval.ms (Kafka's
        delete-expired-group-metadata task)."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
                try:
                    await self.expire_offsets()
                except Exception:  # noqa: BLE001 - retried next round
                    log.exception("Expiring committed offsets failed")
        self._expiration_task = asyncio.get_running_loop().create_task(loop(), name="offset expiration")

    def _expired(self, group: GroupMetadata, now_ms: int) -> list[TopicPartition]:
        """KIP-211: an offset expires at its explicit expire timestamp if the commit gave one;
        otherwise offsets.retention.minutes after the group became Empty (or after the commit,
        for a group that never had members) — and, in a non-empty "consumer" group, only offsets
        of topics no member subscribes to, counted from their commit."""
        retention_ms = self.config.offsets_retention_minutes * 60_000
        if group.is_(EMPTY):
            subscribed: set[str] = set()
        elif group.protocol_type == "consumer" and group.is_(STABLE):
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return []
        else:
            return []
        expired = []
        for tp, committed in group.offsets.items():
            if committed.expire_timestamp_ms >= 0:
                if now_ms >= committed.expire_timestamp_ms:
                    expired.append(tp)
                continue
            if tp.topic in subscribed:
                continue
            base = committed.commit_timestamp_ms
            if group.is_(EMPTY) and group.current_state_timestamp_ms >= 0 and group.protocol_type:
                base = group.current_state_timestamp_ms
            if now_ms - base >= retention_ms:
                expired.append(tp)
        return expired

    async def expire_offsets(self) -> int:
        """Write tombstones for expired offsets, and for Empty groups left without any. Returns
        how many offsets expired."""
        now_ms = self._now()
        total = 0
        for group in list(self.groups.values()):
            try:
                self.check_group(group.group_id)
            except KafkaError:
                continue
            expired = self._expired(group, now_ms)
            remove_group = (group.is_(EMPTY) and len(expired) == len(group.offsets)
                            and not group.pending_txn_offsets)  # a transaction may still commit some
            if not expired and not remove_group:
                continue
            entries = [(encode_offset_commit_key(group.group_id, tp.topic, tp.partition), None) for tp in expired]
            if remove_group:
                entries.append((encode_group_metadata_key(group.group_id), None))
            await self._append(group.group_id, entries, for_offsets=False)
            for tp in expired:
                group.offsets.pop(tp, None)
            total += len(expired)
            if remove_group and group.is_(EMPTY) and not group.offsets and self.groups.get(group.group_id) is group:
                group.transition_to(DEAD, now_ms)
                del self.groups[group.group_id]
        if total:
            log.info("Removed %d expired offsets", total)
        return total

    def shutdown(self) -> None:
        if self._expiration_task is not None:
            self._expiration_task.cancel()
        for group in self.groups.values():
            self._cancel_join_timer(group)
            for member in group.members.values():
                self._cancel_heartbeat(member)
