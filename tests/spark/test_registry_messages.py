"""Protobuf message classes for the typed-column tests, built at run time (no protoc)."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2


def protobuf_user_class():
    """example.User {string name = 1; int32 age = 2; google.protobuf.Timestamp seen = 3;
    repeated string tags = 4;}: the well-known Timestamp is imported, not registered."""
    file = descriptor_pb2.FileDescriptorProto(name="example/user.proto", package="example",
                                              syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    message = file.message_type.add(name="User")
    types = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="name", number=1, type=types.TYPE_STRING)
    message.field.add(name="age", number=2, type=types.TYPE_INT32)
    message.field.add(name="seen", number=3, type=types.TYPE_MESSAGE,
                      type_name=".google.protobuf.Timestamp")
    message.field.add(name="tags", number=4, type=types.TYPE_STRING, label=types.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    timestamp_file = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp_file)
    pool.Add(timestamp_file)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("example.User"))
