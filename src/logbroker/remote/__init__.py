"""Tiered storage (KIP-405): closed segments copied to a remote store and read back from it.

storage_manager.py holds the stores (one interface: an S3 bucket or a local directory),
metadata.py the remote segment metadata kept beside the files and the layout, remote_partition.py
what the store holds for one partition, remote_log_manager.py the leader's copy and expiry work
(and a follower's view of it), remote_log_reads.py the fetches and timestamp lookups served from
the store, remote_read.py the pure functions that cut a fetch out of a segment's bytes.
"""
