"""Consumer groups on the KIP-848 protocol: ConsumerGroupHeartbeat, ConsumerGroupDescribe, timers.

The consumer half of Kafka's GroupMetadataManager (consumerGroupHeartbeat and its helpers). One
heartbeat, under the group's lock:

1. find or create the group and the member (epoch 0 joins; a static member with an instance id
   takes the place of the one that left with epoch -2; otherwise the member epoch must be the
   current one, or the previous one when the answer that bumped it was lost);
2. update the member's subscription; the group epoch is bumped when a subscription changes or
   when the subscribed topics (names and regular expressions, resolved against the metadata on
   every heartbeat) gain or lose partitions;
3. when the group epoch is ahead of the assignment epoch, compute a new target assignment for
   every member with the server assignor the members prefer (coordinator/assignors.py);
4. move this member one step towards its target (coordinator/current_assignment.py);

then append the records all that produced to `__consumer_offsets`, replay them into the group
(ConsumerGroup.replay), and answer with the member's epoch and, when it changed or the request
was a full one, its assignment. Only this member is reconciled: the others move on at their own
next heartbeats, which is what makes the protocol incremental.

A member that stops heartbeating for group.consumer.session.timeout.ms, or does not revoke its
partitions within its rebalance timeout, is fenced: removed as if it had left, with a group epoch
bump so the others share its partitions. An empty classic group (only committed offsets, say) is
taken over by the first consumer-protocol member, and an empty consumer group by a classic
JoinGroup (classic_group_manager.py); a group of one type with members refuses the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import uuid
from collections.abc import Iterable

from logbroker.coordinator.assignors import Assignment, MemberSpec, PartitionAssignor, assignors_from_config
from logbroker.coordinator.classic_group import ClassicGroup
from logbroker.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    MemberSubscription,
    RegexError,
    TopicMetadata,
    compile_regex,
    current_assignment_record,
    group_epoch_record,
    member_record,
    member_tombstones,
    partition_metadata_record,
    preferred_assignor,
    target_member_record,
    target_metadata_record,
)
from logbroker.coordinator.current_assignment import reconcile
from logbroker.coordinator.modern_group import ModernGroupManager
from logbroker.coordinator.record_schema import CoordinatorRecord
from logbroker.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    KafkaError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")

@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat, with Kafka's "null: unchanged since the last heartbeat" kept as None."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""

    @property
    def is_full(self) -> bool:
        """A joining member, or one that resent everything after an error: it gets its whole
        assignment back whether or not it changed."""
        return self.member_epoch == 0 or (self.rebalance_timeout_ms != -1 and self.subscribed_topic_names is not None
                                          and self.owned is not None)


class ConsumerGroupManager(ModernGroupManager):
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe, and the group coordinator's
    GroupTypeManager for consumer groups (session and rebalance timers)."""

    GROUP_CLASS = ConsumerGroup
    NOUN = "consumer"

    def __init__(self, coordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self._background: set[asyncio.Task] = set()
        self.rebalances = 0  # group epoch bumps (Kafka's consumer-group-rebalance sensor)

    @functools.cached_property
    def assignors(self) -> dict[str, PartitionAssignor]:
        """group.consumer.assignors, by name; the first is the default."""
        return assignors_from_config(self.config.group_consumer_assignors)

    @property
    def default_assignor(self) -> str:
        return next(iter(self.assignors))

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.config.group_consumer_heartbeat_interval_ms

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------
    def validate(self, request: HeartbeatRequest, *, api_version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        if not request.group_id:
            raise InvalidRequestError("GroupId can't be empty.")
        if request.instance_id == "":
            raise InvalidRequestError("InstanceId can't be empty.")
        if request.rack_id == "":
            raise InvalidRequestError("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise InvalidRequestError("MemberId can't be empty.")
        elif epoch == 0:
            if api_version >= 1 and not request.member_id:
                raise InvalidRequestError("MemberId can't be empty.")
            if request.rebalance_timeout_ms == -1:
                raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or any(ps for _, ps in request.owned):
                raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and not request.subscribed_topic_regex:
                raise InvalidRequestError("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise InvalidRequestError("MemberId can't be empty.")
            if request.instance_id is None:
                raise InvalidRequestError("InstanceId can't be null.")
        else:
            raise InvalidRequestError(f"MemberEpoch {epoch} is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise UnsupportedAssignorError(
                f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.assignors)}.")
        if request.subscribed_topic_regex:
            try:
                compile_regex(request.subscribed_topic_regex)
            except RegexError as exc:
                raise InvalidRegularExpressionError(
                    f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is not a valid regular "
                    f"expression: {exc}") from None

    async def heartbeat(self, request: HeartbeatRequest, *, api_version: int) -> dict:
        self.validate(request, api_version=api_version)
        self.coordinator.check_group(request.group_id)
        if not request.member_id:  # v0: the coordinator names the member
            request = dataclasses.replace(request, member_id=str(uuid.uuid4()))
        group = self._group_for(request)
        async with group.lock:
            if self.coordinator.groups.get(request.group_id) is not group:
                # Deleted, unloaded or taken over while this heartbeat waited for the lock.
                return await self.heartbeat(request, api_version=api_version)
            if request.member_epoch < 0:
                return await self._leave(group, request)
            return await self._heartbeat(group, request)

    def _group_for(self, request: HeartbeatRequest) -> ConsumerGroup:
        """The request's consumer group; a join creates it (in memory only until its first
        records are appended), taking over an empty classic group's place and offsets."""
        existing = self.coordinator.groups.get(request.group_id)
        if isinstance(existing, ConsumerGroup) and not existing.dead:
            return existing
        if request.member_epoch != 0:
            if existing is None or isinstance(existing, ConsumerGroup):
                raise UnknownMemberIdError(f"Consumer group {request.group_id} not found.")
            raise GroupIdNotFoundError(f"Group {request.group_id} is not a consumer group.")
        group = ConsumerGroup(request.group_id)
        if existing is not None:
            if not isinstance(existing, ClassicGroup) or not existing.is_empty:
                raise GroupIdNotFoundError(f"Group {request.group_id} is not a consumer group.")
            group.offsets, group.pending_txn_offsets = existing.offsets, existing.pending_txn_offsets
            group.takes_over = existing
        self.coordinator.groups[request.group_id] = group
        return group

    async def _heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest) -> dict:
        group_id = group.group_id
        records: list[CoordinatorRecord] = []
        member, replaced = self._member_for(group, request)
        is_new = member.member_id not in group.members
        if is_new and replaced is None and len(group.members) >= self.config.group_consumer_max_size:
            raise GroupMaxSizeReachedError(f"The consumer group has reached its maximum capacity of "
                                           f"{self.config.group_consumer_max_size} members.")
        if replaced is not None:
            records += member_tombstones(group_id, replaced.member_id)
            records.append(target_member_record(group_id, member.member_id,
                                                group.target_assignment.get(replaced.member_id, {})))
        subscription = _updated(member.subscription, request)
        bump = False
        if is_new or subscription != member.subscription:
            records.append(member_record(group_id, member.member_id, subscription))
            bump = (subscription.subscribed_topic_names != member.subscription.subscribed_topic_names
                    or subscription.subscribed_topic_regex != member.subscription.subscribed_topic_regex)
        if replaced is not None:
            records.append(current_assignment_record(group_id, member.member_id, member.assignment))

        # The group as it will be: this member's new subscription, without the member it replaces.
        subscriptions = {mid: m.subscription for mid, m in group.members.items()}
        if replaced is not None:
            del subscriptions[replaced.member_id]
        subscriptions[member.member_id] = subscription
        metadata = self._subscription_metadata(subscriptions.values())
        if metadata != group.subscription_metadata:
            records.append(partition_metadata_record(group_id, metadata))
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(group_epoch_record(group_id, group_epoch))
            log.info("[GroupId %s] Bumped group epoch to %d.", group_id, group_epoch)

        if group_epoch > group.assignment_epoch:
            # The current targets, the replaced static member's under its successor's id.
            previous = dict(group.target_assignment)
            if replaced is not None:
                previous[member.member_id] = previous.pop(replaced.member_id, {})
            targets = self._target_assignment(group.group_id, subscriptions, metadata, previous, group_epoch)
            for mid, target in targets.items():
                if target != previous.get(mid):
                    records.append(target_member_record(group_id, mid, target))
            records.append(target_metadata_record(group_id, group_epoch))
            target_epoch, target = group_epoch, targets.get(member.member_id, {})
        else:
            target_epoch = group.assignment_epoch
            target = group.target_assignment.get((replaced or member).member_id, {})

        assignment = member.assignment
        if not member.is_reconciled_to(target_epoch):
            assignment = reconcile(member.assignment, member_id=member.member_id, target_epoch=target_epoch,
                                   target=target, owner=group.owner, owned=request.owned)
            if assignment != member.assignment:
                records.append(current_assignment_record(group_id, member.member_id, assignment))

        previously_assigned = member.assignment.assigned if not is_new or replaced is not None else None
        await self._write(group, records)
        member = group.members[member.member_id]
        if replaced is not None:
            self._stop_member(replaced)
        self._schedule_session_timeout(group, member)
        self._schedule_rebalance_timeout(group, member)
        response = {"error_code": 0, "member_id": member.member_id, "member_epoch": member.member_epoch,
                    "heartbeat_interval": self.heartbeat_interval_ms, "assignment": None}
        if request.is_full or member.assignment.assigned != previously_assigned:
            response["assignment"] = {"topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(ps)}
                for topic_id, ps in sorted(member.assignment.assigned.items())]}
        return response

    def _member_for(self, group: ConsumerGroup, request: HeartbeatRequest
                    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member, the static member it takes the place of or None), Kafka's
        getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember."""
        if request.member_epoch == 0:
            existing = group.static_member(request.instance_id)
            if existing is None:
                return group.members.get(request.member_id) or ConsumerGroupMember(request.member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise UnreleasedInstanceIdError(
                    f"Static member {request.member_id} with instance id {request.instance_id} cannot join "
                    f"the group because the instance id is owned by {existing.member_id} member.")
            log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group. Created a new "
                     "member %s to replace the existing member %s.", group.group_id, request.instance_id,
                     request.member_id, existing.member_id)
            replacement = ConsumerGroupMember(
                request.member_id, existing.subscription,
                dataclasses.replace(existing.assignment, member_epoch=0, previous_member_epoch=0))
            return replacement, existing
        member = _known_member(group, request)
        epoch = request.member_epoch
        if epoch > member.member_epoch or (epoch < member.member_epoch and not (
                epoch == member.assignment.previous_member_epoch
                and _is_subset(request.owned, member.assignment.assigned))):
            raise FencedMemberEpochError(
                f"The consumer group member has a {'greater' if epoch > member.member_epoch else 'smaller'} "
                f"member epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin.")
        return member, None

    def _subscription_metadata(self, subscriptions: Iterable[MemberSubscription]) -> dict[str, TopicMetadata]:
        """The existing topics the members subscribe to, by name or by regular expression."""
        subscriptions = list(subscriptions)
        return self.subscription_metadata(
            (name for s in subscriptions for name in s.subscribed_topic_names),
            {compile_regex(s.subscribed_topic_regex) for s in subscriptions if s.subscribed_topic_regex})

    def _target_assignment(self, group_id: str, subscriptions: dict[str, MemberSubscription],
                           metadata: dict[str, TopicMetadata], previous: dict[str, Assignment],
                           group_epoch: int) -> dict[str, Assignment]:
        """Every member's new target, by the assignor most members ask for (else the default),
        sticking to `previous` where it can."""
        name = preferred_assignor(subscriptions.values()) or self.default_assignor
        specs = [MemberSpec(mid, frozenset(t.topic_id for t in metadata.values() if s.subscribes_to(t.name)),
                            previous.get(mid, {}), s.rack_id)
                 for mid, s in subscriptions.items()]
        targets = self.assignors[name].assign(specs, {t.topic_id: t.num_partitions for t in metadata.values()})
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                 group_id, group_epoch, name)
        return targets

    # -- leaving and fencing --------------------------------------------------------------------
    async def _leave(self, group: ConsumerGroup, request: HeartbeatRequest) -> dict:
        member = _known_member(group, request)
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info("[GroupId %s] Static member %s with instance id %s temporarily left the consumer group.",
                     group.group_id, member.member_id, request.instance_id)
            leaving = dataclasses.replace(member.assignment, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                          pending_revocation={})
            await self._write(group, [current_assignment_record(group.group_id, member.member_id, leaving)])
            self._cancel(member, "rebalance_timer")
        else:
            log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, member.member_id)
            await self._fence(group, member)
        return {"error_code": 0, "member_id": member.member_id, "member_epoch": request.member_epoch,
                "heartbeat_interval": 0, "assignment": None}

    async def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Remove the member and bump the group epoch (Kafka's consumerGroupFenceMember)."""
        records = member_tombstones(group.group_id, member.member_id)
        remaining = [m.subscription for mid, m in group.members.items() if mid != member.member_id]
        metadata = self._subscription_metadata(remaining)
        if metadata != group.subscription_metadata:
            records.append(partition_metadata_record(group.group_id, metadata))
        records.append(group_epoch_record(group.group_id, group.group_epoch + 1))
        await self._write(group, records)
        self._stop_member(member)

    def _fence_in_background(self, group: ConsumerGroup, member_id: str, epoch: int | None, reason: str) -> None:
        async def fence() -> None:
            async with group.lock:
                member = group.members.get(member_id)
                if self.coordinator.groups.get(group.group_id) is not group or member is None:
                    return
                if epoch is not None and member.member_epoch != epoch:
                    return  # it moved on meanwhile
                log.info("[GroupId %s] Member %s fenced from the group because %s.", group.group_id, member_id,
                         reason)
                try:
                    await self._fence(group, member)
                except KafkaError as exc:
                    log.warning("[GroupId %s] Fencing member %s failed (%s); retrying at its next deadline",
                                group.group_id, member_id, exc)
                    self._schedule_session_timeout(group, member)
        task = asyncio.get_running_loop().create_task(fence())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- timers ---------------------------------------------------------------------------------
    def _schedule_session_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self._cancel(member, "session_timer")
        member.session_timer = asyncio.get_running_loop().call_later(
            self.config.group_consumer_session_timeout_ms / 1000, self._fence_in_background, group,
            member.member_id, None, "the member session expired")

    def _schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A member asked to revoke partitions has its rebalance timeout to do so (Kafka's
        scheduleConsumerGroupRebalanceTimeout), counted from when it was asked."""
        if member.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
            self._cancel(member, "rebalance_timer")
            return
        if member.rebalance_timer is not None and member.rebalance_timer_epoch == member.member_epoch:
            return
        self._cancel(member, "rebalance_timer")
        timeout_ms = max(member.subscription.rebalance_timeout_ms, 0)
        member.rebalance_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._fence_in_background, group, member.member_id, member.member_epoch,
            f"it failed to transition from epoch {member.member_epoch} within {timeout_ms}ms")
        member.rebalance_timer_epoch = member.member_epoch

    @staticmethod
    def _cancel(member: ConsumerGroupMember, timer: str) -> None:
        handle = getattr(member, timer)
        if handle is not None:
            handle.cancel()
            setattr(member, timer, None)

    def _stop_member(self, member: ConsumerGroupMember) -> None:
        self._cancel(member, "session_timer")
        self._cancel(member, "rebalance_timer")

    # -- persistence ----------------------------------------------------------------------------
    async def _write(self, group: ConsumerGroup, records: list[CoordinatorRecord]) -> None:
        """Append the records, then replay them into the group (only then: the group never holds
        what the log does not). A group created by this heartbeat that could not be written is
        taken back, restoring the classic group it was to replace."""
        if not records:
            return
        entries = [r.encode() for r in records]
        replaced_classic = group.takes_over
        if replaced_classic is not None:
            entries[:0] = replaced_classic.tombstones()
        try:
            await self.coordinator.append(group.group_id, entries, for_offsets=False)
        except KafkaError:
            if group.group_epoch == 0 and not group.members and self.coordinator.groups.get(group.group_id) is group:
                if replaced_classic is not None:
                    self.coordinator.groups[group.group_id] = replaced_classic
                else:
                    del self.coordinator.groups[group.group_id]
            raise
        if replaced_classic is not None:
            self.coordinator.classic.stop(replaced_classic)
            group.takes_over = None
        epoch = group.group_epoch
        for record in records:
            group.replay(record)
        if group.group_epoch > epoch:
            self.rebalances += 1

    # -- the shell's hooks (group.GroupTypeManager; the rest is ModernGroupManager's) -------------
    def installed(self, group: ConsumerGroup) -> None:
        """A loaded group: every member has a session to heartbeat in (and, if it was revoking,
        its rebalance timeout) from now, as Kafka rearms them on load."""
        for member in group.members.values():
            self._schedule_session_timeout(group, member)
            self._schedule_rebalance_timeout(group, member)

    # -- ConsumerGroupDescribe ------------------------------------------------------------------
    def describe_consumer_group(self, group_id: str) -> dict:
        group = self._live_group(group_id)
        names = {t.topic_id: t.name for t in group.subscription_metadata.values()}

        def described(assignment: Assignment) -> dict:
            parts = []
            for topic_id, ps in sorted(assignment.items()):
                name = names.get(topic_id)
                if name is None:
                    info = self.coordinator.store.topic_by_id(topic_id)
                    name = info.name if info is not None else ""
                parts.append({"topic_id": topic_id, "topic_name": name, "partitions": sorted(ps)})
            return {"topic_partitions": parts}

        members = [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.subscription.rack_id,
                    "member_epoch": m.member_epoch, "client_id": m.subscription.client_id,
                    "client_host": m.subscription.client_host,
                    "subscribed_topic_names": list(m.subscription.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscription.subscribed_topic_regex,
                    "assignment": described(m.assignment.assigned),
                    "target_assignment": described(group.target_assignment.get(m.member_id, {})),
                    "member_type": 1}
                   for m in group.members.values()]
        return {"error_code": 0, "group_id": group_id, "group_state": group.state_name,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "assignor_name": group.preferred_assignor() or self.default_assignor, "members": members}


def _known_member(group: ConsumerGroup, request: HeartbeatRequest) -> ConsumerGroupMember:
    """The member a heartbeat of a member already in the group names: by its instance id if it
    has one (FENCED_INSTANCE_ID when another member holds it), else by its member id."""
    if request.instance_id is None:
        return group.member(request.member_id)
    member = group.static_member(request.instance_id)
    if member is None:
        raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
    if member.member_id != request.member_id:
        raise FencedInstanceIdError(f"Static member {request.member_id} with instance id "
                                    f"{request.instance_id} was fenced by member {member.member_id}.")
    return member


def _updated(subscription: MemberSubscription, request: HeartbeatRequest) -> MemberSubscription:
    """The member's subscription with what the heartbeat changed (None: unchanged)."""
    changes = {"client_id": request.client_id, "client_host": request.client_host}
    if request.instance_id is not None:
        changes["instance_id"] = request.instance_id
    if request.rack_id is not None:
        changes["rack_id"] = request.rack_id
    if request.rebalance_timeout_ms != -1:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.subscribed_topic_names is not None:
        changes["subscribed_topic_names"] = tuple(request.subscribed_topic_names)
    if request.subscribed_topic_regex is not None:
        changes["subscribed_topic_regex"] = request.subscribed_topic_regex or None
    if request.server_assignor is not None:
        changes["server_assignor"] = request.server_assignor
    return dataclasses.replace(subscription, **changes)


def _is_subset(owned, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(frozenset(ps) <= assigned.get(topic_id, frozenset()) for topic_id, ps in owned)
