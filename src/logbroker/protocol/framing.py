"""Splitting a connection's byte stream into request frames.

Every Kafka request is a frame: an int32 big-endian size, then that many bytes (header + body).
`FrameDecoder` is fed whatever each socket read returned and hands back every frame completed by
it, in order. It never touches a socket.

Why it is shaped this way. The server calls `feed` on every read, and clients pipeline, so one read
holds many small frames or a slice of one big Produce. Copies are what cost:

* Frames that lie wholly inside the data just fed (the common case) come back as memoryviews of
  that `bytes` object — no copy at all. kio then copies a Produce's records into the `bytes`
  of the parsed request, the first of the two copies on the way in (see codec.py).
* Only an incomplete frame at the end of a read is kept, in a bytearray that grows by appends
  (amortised O(1) a byte, never O(n²)). The frame it completes is handed out as a memoryview of
  that bytearray, and the decoder then starts a fresh bytearray for the next partial frame instead
  of compacting the old one in place. A bytearray cannot be resized while a memoryview of it is
  alive, so this is what makes handing out views safe: a buffer that has been handed out is never
  written again. The bytes copied into the new buffer are only the new partial frame's, which came
  in with this read, so each byte is copied at most once.

A frame is therefore valid for as long as the caller keeps it; it pins the chunk it came from.

The size prefix is checked the moment its 4 bytes are in, before any of the body is buffered: a
negative size or one above `socket.request.max.bytes` raises InvalidReceiveError (Kafka's
InvalidReceiveException) and the decoder is then unusable — the connection must be closed, since
the stream has lost its framing. Frames completed before the bad prefix in the same `feed` are
still returned (Kafka handles every request it has fully read before the channel fails): the error
is then kept in `failed` and raised by the next `feed`, and the caller closes the connection once
those requests are answered.
"""

from __future__ import annotations

import struct

from logbroker.protocol.errors import InvalidReceiveError

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes
SIZE_PREFIX_BYTES = 4

_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Incremental decoder of size-prefixed frames. Not thread-safe; one per connection."""

    __slots__ = ("_max_frame_bytes", "_partial", "_partial_size", "failed")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self._max_frame_bytes = max_frame_bytes
        # Bytes of the one incomplete frame, size prefix included (empty when between frames).
        self._partial = bytearray()
        # That frame's body size once its prefix is complete, else -1.
        self._partial_size = -1
        # The framing error found after the frames the last `feed` returned, if any (read it,
        # never set it): an attribute, not a property, as the server reads it after every read.
        self.failed: InvalidReceiveError | None = None

    @property
    def max_frame_bytes(self) -> int:
        return self._max_frame_bytes

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (prefix included)."""
        return len(self._partial)

    @property
    def pending_frame_size(self) -> int | None:
        """The announced body size of the incomplete frame, if its prefix has arrived."""
        return self._partial_size if self._partial_size >= 0 else None

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Take the next bytes of the stream; return the frames they complete (bodies, no prefix).

        Pass `bytes` (what asyncio's data_received gives): the returned views may point into it.
        Any other buffer is copied first, since the caller may reuse it.
        """
        if self.failed is not None:
            raise self.failed
        if type(data) is not bytes:
            data = bytes(data)
        view = memoryview(data)
        end = len(data)
        pos = 0
        frames: list[memoryview] = []
        partial = self._partial

        if partial:
            # Finish the frame started by earlier reads, copying only the bytes it still needs.
            if self._partial_size < 0:
                take = min(SIZE_PREFIX_BYTES - len(partial), end)
                partial += view[:take]
                pos = take
                if len(partial) < SIZE_PREFIX_BYTES:
                    return frames
                self._partial_size = self._check_size(_SIZE.unpack_from(partial, 0)[0])
            need = SIZE_PREFIX_BYTES + self._partial_size - len(partial)
            take = min(need, end - pos)
            partial += view[pos:pos + take]
            pos += take
            if take < need:
                return frames
            frames.append(memoryview(partial)[SIZE_PREFIX_BYTES:].toreadonly())
            # That bytearray now belongs to the view just handed out; never resize it again.
            self._partial = partial = bytearray()
            self._partial_size = -1

        # Frames lying wholly in `data`: views, no copies.
        unpack = _SIZE.unpack_from
        max_size = self._max_frame_bytes
        while end - pos >= SIZE_PREFIX_BYTES:
            (size,) = unpack(data, pos)
            if size < 0 or size > max_size:
                try:
                    self._check_size(size)
                except InvalidReceiveError:
                    if not frames:
                        raise
                    return frames  # answered first; the error waits in `failed`
            start = pos + SIZE_PREFIX_BYTES
            stop = start + size
            if stop > end:
                self._partial_size = size
                break
            frames.append(view[start:stop])
            pos = stop

        if pos < end:
            partial += view[pos:]
        return frames

    def _check_size(self, size: int) -> int:
        if size < 0 or size > self._max_frame_bytes:
            if size < 0:
                message = f"Invalid receive (size = {size}): negative frame size"
            else:
                message = (f"Invalid receive (size = {size} larger than {self._max_frame_bytes}); "
                           f"the limit is socket.request.max.bytes")
            self.failed = InvalidReceiveError(message, size=size, max_size=self._max_frame_bytes)
            raise self.failed
        return size
