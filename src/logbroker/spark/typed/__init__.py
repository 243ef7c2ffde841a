"""Typed key and value columns: records framed the way Confluent's serializers frame them
(magic byte 0, a 4-byte schema id, then Avro, Protobuf or JSON) decoded into Spark struct
columns on reads, and struct columns encoded that way on writes, with the schemas from any
Confluent-compatible schema registry (over its REST API)."""
