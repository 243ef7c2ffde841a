"""Offline tools over logbroker's (and Kafka's) data files, as Kafka ships them in bin/.

Each tool is a module of pure-ish functions yielding output lines, with a thin click command in
`logbroker.cli`; tools read storage and records, and never a running broker's sockets.
"""
