"""The web console behind `logbroker console` (cli/web_console.py): pages for a Kafka cluster's
brokers, topics and their messages, consumer groups, ACLs and SCRAM users.

    model.py    value types the pages are built from
    cluster.py  every Kafka request, through confluent-kafka (blocking; run in worker threads)
    sampler.py  throughput and lag over time, sampled in a background thread
    render.py   pure formatting: JSON / text / hex, the message filter, form parsers
    guard.py    basic auth, read-only mode and same-origin writes (ASGI middleware)
    app.py      Starlette routes rendering templates/ (Jinja2, htmx and uPlot from static/)

It talks to the cluster only through the Kafka protocol, so it works with any Kafka cluster.
"""
