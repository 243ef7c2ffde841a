"""Hand-written encoders of the hot responses: Produce, Fetch, Metadata, ListOffsets.

kio's generic encoder costs tens of microseconds for a Produce response and about a millisecond for
a ten-topic Metadata response; these take plain values (NamedTuples defined next to each encoder)
and produce the same bytes — tests/protocol/test_responses_*.py compare them byte for byte with
kio's encoding for every version we support. Each returns a whole frame: size prefix, response
header (v1 with its tagged-field byte for flexible versions), body. Fetch returns a list of chunks
so that record data can go out with os.sendfile without being copied.

Tagged fields follow Kafka's generated code: a tagged field is written only when it differs from
its default, in tag order.
"""
