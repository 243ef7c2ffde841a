"""The reference pipeline: a clickstream through logbroker and Spark Structured Streaming.

    python -m logbroker.pipeline [--events N] [--bootstrap HOST:PORT] [--master URL]

See `run` for the steps, `events` for the feed, `job` for the streaming query and `results` for the
recount it is checked against. Importing this package starts nothing.
"""
