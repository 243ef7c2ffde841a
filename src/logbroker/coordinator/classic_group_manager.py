"""Classic groups: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (the pre-KIP-848 protocol).

The classic half of Kafka's ClassicGroupManager (the GroupCoordinator before Kafka 4): the
group's generation, leader, members and assignment are stored in its `__consumer_offsets`
partition after each SyncGroup (a ClassicGroupValue), through the coordinator shell
(coordinator/group_coordinator.py), which also routes requests here and owns loading.

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

from logbroker.coordinator.classic_group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from logbroker.coordinator.group import Group, GroupType
from logbroker.coordinator.offsets_schema import (
    GroupMetadataRecord,
    MemberRecord,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from logbroker.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    KafkaError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

log = logging.getLogger("kafka.coordinator.group.GroupCoordinator")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (ClassicGroupState.EMPTY, ClassicGroupState.PREPARING_REBALANCE,
                                              ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE,
                                              ClassicGroupState.DEAD)


class MemberIdRequired(MemberIdRequiredError):
    """MEMBER_ID_REQUIRED, carrying the member id the client must rejoin with."""

    def __init__(self, member_id: str) -> None:
        super().__init__(f"rejoin with member id {member_id}")
        self.member_id = member_id



class ClassicGroupManager:
    """The classic groups' requests and timers; the groups themselves are in the coordinator's
    `groups`, beside the groups of other types."""

    def __init__(self, coordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self._background: set[asyncio.Task] = set()  # the stores of empty generations, held till done

    def _now(self) -> int:
        return self.coordinator.clock.time_ms()

    # -- JoinGroup ------------------------------------------------------------------------------
    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], supports_skip_assignment: bool) -> dict:
        self.coordinator.check_group(group_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            raise InvalidSessionTimeoutError(
                f"session timeout {session_timeout_ms} ms is outside group.min/max.session.timeout.ms")
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        group = self.coordinator.groups.get(group_id)
        if group is not None and not isinstance(group, ClassicGroup):
            group = await self._take_over(group)
        if group is None:
            if member_id:
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            group = self.coordinator.groups[group_id] = ClassicGroup(group_id, current_state_timestamp_ms=self._now())
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
        self.schedule_heartbeat(group, member)
        return self._join_response(group, member, as_leader=False)

    async def _take_over(self, group: Group) -> ClassicGroup:
        """A classic JoinGroup for a group of another type: an empty consumer group is deleted
        (its records tombstoned, its offsets kept) and becomes a classic group, as Kafka converts
        it; one with members refuses the member."""
        def refuse() -> None:
            if group.group_type is not GroupType.CONSUMER or not group.is_empty:
                raise InconsistentGroupProtocolError(
                    f"Group {group.group_id} is a {group.group_type.value} group with members; a classic "
                    "member cannot join it")
        refuse()
        async with group.lock:
            if self.coordinator.groups.get(group.group_id) is not group:
                raise CoordinatorNotAvailableError(f"group {group.group_id} changed meanwhile; retry")
            refuse()
            await self.coordinator.append(group.group_id, group.tombstones(), for_offsets=False)
            self.coordinator.remove_group(group)
        classic = ClassicGroup(group.group_id, current_state_timestamp_ms=self._now(), offsets=group.offsets,
                               pending_txn_offsets=group.pending_txn_offsets)
        self.coordinator.groups[group.group_id] = classic
        log.info("Converted empty %s group %s to a classic group", group.group_type.value, group.group_id)
        return classic

    def _classic(self, group_id: str) -> ClassicGroup | None:
        """The classic group `group_id`; None if there is none (a group of another type has no
        classic members)."""
        group = self.coordinator.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _is_fenced(self, group: ClassicGroup, member_id: str, group_instance_id: str | None) -> bool:
        mapped = group.static_member_id(group_instance_id)
        return mapped is not None and mapped != member_id

    async def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str,
                                        group_instance_id: str | None, **kw) -> dict:
        member = ClassicGroupMember(member_id, group_instance_id, is_new=True, **kw)
        future = member.join_future = asyncio.get_running_loop().create_future()
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self.schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        self._maybe_complete_join(group)
        return await future

    async def _update_member_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember, *,
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
        self.schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._maybe_complete_join(group)
        return await future

    async def _rejoin_static_member(self, group: ClassicGroup, old_member_id: str, new_member_id: str,
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
            self.schedule_heartbeat(group, member)
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

    def _join_response(self, group: ClassicGroup, member: ClassicGroupMember, *, as_leader: bool) -> dict:
        members = []
        if as_leader and group.protocol_name is not None:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol_name)} for m in group.members.values()]
        return {"error_code": 0, "generation_id": group.generation_id, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "leader": group.leader_id or "",
                "member_id": member.member_id, "members": members, "skip_assignment": False}

    # -- rebalances -----------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
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

    def _initial_delay_expired(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        group.join_timer = None
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            next_delay = min(delay_ms, remaining_ms)
            group.join_timer = asyncio.get_running_loop().call_later(
                next_delay / 1000, self._initial_delay_expired, group, delay_ms, max(remaining_ms - delay_ms, 0))
            return
        group.initial_join_delay = False
        self._complete_join(group)

    def _cancel_join_timer(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_join_delay = False

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if group.is_(PREPARING) and not group.initial_join_delay and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
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
        if not group.members:
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
            self.schedule_heartbeat(group, member)

    def _propagate_sync_error(self, group: ClassicGroup, error: KafkaError) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.is_awaiting_sync:
                member.sync_future.set_exception(error)
            member.sync_future = None

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember, reason: str) -> None:
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
    def schedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self._cancel_heartbeat(member)
        member.heartbeat_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._heartbeat_expired, group, member)

    @staticmethod
    def _cancel_heartbeat(member: ClassicGroupMember) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _heartbeat_expired(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member or self.coordinator.groups.get(group.group_id) is not group:
            return
        if member.is_awaiting_join or member.is_awaiting_sync:
            self.schedule_heartbeat(group, member)
            return
        log.info("Member %s in group %s has failed (no heartbeat for %d ms), removing it from the group",
                 member.member_id, group.group_id, member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, "session timeout expired")

    def _expire_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)

    # -- SyncGroup / Heartbeat / LeaveGroup -----------------------------------------------------
    def _member_for(self, group_id: str, member_id: str, group_instance_id: str | None,
                    generation_id: int) -> tuple[ClassicGroup, ClassicGroupMember]:
        """The checks SyncGroup, Heartbeat and OffsetCommit share, in Kafka's order."""
        self.coordinator.check_group(group_id)
        group = self._classic(group_id)
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
            self.schedule_heartbeat(group, member)
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
                        self.schedule_heartbeat(group, m)
                    group.transition_to(STABLE, self._now())
                    log.info("Assignment received from leader %s for group %s for generation %d",
                             member_id, group_id, generation)
        return await future

    @staticmethod
    def _sync_response(group: ClassicGroup, assignment: bytes) -> dict:
        return {"error_code": 0, "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "assignment": assignment}

    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> None:
        group, member = self._member_for(group_id, member_id, group_instance_id, generation_id)
        if group.is_(EMPTY):
            raise UnknownMemberIdError(f"group {group_id} is empty")
        self.schedule_heartbeat(group, member)
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
        self.coordinator.check_group(group_id)
        group = self._classic(group_id)
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


    # -- describing, deleting, loading and unloading ----------------------------------------------
    def describe(self, group: ClassicGroup) -> dict:
        stable = group.is_(STABLE)
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b""}
                   for m in group.members.values()]
        return {"error_code": 0, "group_id": group.group_id, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "", "members": members}

    def installed(self, group: ClassicGroup) -> None:
        """A loaded group: each member gets its session timer back."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member)

    def unloaded(self, group: ClassicGroup, error: KafkaError) -> None:
        """The group's partition left this broker: timers cancelled, parked JoinGroup and
        SyncGroup answered `error`."""
        self.stop(group)
        for member in group.members.values():
            for fut in (member.join_future, member.sync_future):
                if fut is not None and not fut.done():
                    fut.set_exception(error)
            member.join_future = member.sync_future = None

    def removed(self, group: ClassicGroup, now_ms: int) -> None:
        """The group was deleted or unloaded: it stops and turns Dead."""
        self.stop(group)
        group.transition_to(DEAD, now_ms)

    def stop(self, group: ClassicGroup) -> None:
        """Cancel the group's timers (deleted, unloaded, or the broker stops)."""
        self._cancel_join_timer(group)
        for member in group.members.values():
            self._cancel_heartbeat(member)

    def _group_record(self, group: ClassicGroup, assignments: dict[str, bytes] | None) -> GroupMetadataRecord:
        members = tuple(
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                         m.session_timeout_ms,
                         m.metadata(group.protocol_name) if group.protocol_name else b"",
                         (assignments or {}).get(m.member_id, m.assignment))
            for m in group.members.values())
        return GroupMetadataRecord(group.protocol_type or "", group.generation_id, group.protocol_name,
                                   group.leader_id, group.current_state_timestamp_ms, members)

    async def _store_group(self, group: ClassicGroup, *, assignments: dict[str, bytes] | None = None) -> None:
        value = encode_group_metadata_value(self._group_record(group, assignments))
        await self.coordinator.append(group.group_id, [(encode_group_metadata_key(group.group_id), value)], for_offsets=False)

    def _store_group_in_background(self, group: ClassicGroup) -> None:
        async def store() -> None:
            try:
                await self._store_group(group)
            except KafkaError as exc:
                log.warning("Failed to store metadata of group %s: %s", group.group_id, exc)
        task = asyncio.get_running_loop().create_task(store())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

