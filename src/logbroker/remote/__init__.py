"""Tiered storage (KIP-405): closed segments copied to a remote store and read back from it.

storage_manager.py holds the stores (one interface, an S3 bucket or a local directory), metadata.py
the remote segment metadata kept beside the files, remote_log_manager.py the per-partition copy,
expiry and read work of the leader, remote_read.py the reading of one fetch from a remote segment.
"""
