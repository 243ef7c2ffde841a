"""Splitting a connection's byte stream into request frames.

Every Kafka request is a frame: an int32 big-endian size, then that many bytes (header + body).
`FrameDecoder` is fed whatever each socket read returned and hands back every frame completed by
it, in order. It never touches a socket.

Why it is shaped this way. The server reads every connection into shared buffers and calls
`feed` with a view of each read, and clients pipeline, so one read holds many small frames or a
slice of one big Produce. Copies are what cost, so each byte is copied at most once, a large
frame's mostly not at all:

* Frames that lie wholly inside the data just fed come back as memoryviews of it. Given any
  buffer other than `bytes`, which the next read may overwrite, `feed` copies it into one `bytes`
  from the first such frame on — the copy asyncio would have made anyway to hand a read to
  `data_received` — and the frames are views of that; unless the caller lends the buffer (`lent`:
  it will not write those bytes while a frame views them; the server's large reads,
  server/read_buffers.py), when the frames are views of it with no copy. A read that completes no
  frame (the middle of a large one) is not copied whole: its bytes go straight to where the
  incomplete frame is kept.
* Only an incomplete frame at the end of a read is kept. A small one is kept in a bytearray that
  grows by appends (amortised O(1) a byte, never O(n²)); the frame it completes is handed out as a
  memoryview of that bytearray, and the decoder then starts a fresh bytearray for the next partial
  frame instead of compacting the old one in place. A bytearray cannot be resized while a memoryview
  of it is alive, so this is what makes handing out views safe: a buffer that has been handed out
  is never written again.
* A frame whose body still needs DIRECT_READ_BYTES or more gets a buffer of exactly its size, as
  Kafka's NetworkReceive allocates one after reading the size, and `direct` is the unfilled rest of
  it: the socket reads the body straight into the frame, and `filled` takes the count. A large
  Produce's records are then not copied in user space on the way in beyond the part that came
  with the read which started it; fed bytes (TLS plaintext) land in the same buffer. The buffer is
  not zero-filled first (`_frame_buffer`): the frame is handed out only once every byte of it has
  been read in. Unlike Kafka, the buffer is allocated only once an eighth of the body
  (DIRECT_READ_SHARE) has arrived: a client must send bytes to make the broker hold eight times
  as many, not announce 100 MB in four bytes.

A frame is therefore valid for as long as the caller keeps it; it pins the buffer it came from.

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
# A frame body still this far from complete is read into its own buffer rather than copied out of
# reads. Filling a buffer exactly takes a recv of its own (and libuv then tries one more), which
# costs about what copying a 64 KiB Produce's rest costs (confluent-kafka's usual request); from
# here on the copy is the larger (kcat's ~1 MB requests: 10-13% of the broker's CPU in memmove).
DIRECT_READ_BYTES = 131072
DIRECT_READ_SHARE = 8  # ... once 1/8 of its body is here

_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Incremental decoder of size-prefixed frames. Not thread-safe; one per connection.

    At most one of `_partial` (a small incomplete frame, prefix included) and `_body` (a large
    frame's own buffer, `_filled` bytes of it read) holds bytes at any time."""

    __slots__ = ("_max_frame_bytes", "_partial", "_partial_size", "_body", "_filled", "direct", "failed",
                 "large_frames")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self._max_frame_bytes = max_frame_bytes
        # Bytes of the one incomplete small frame, size prefix included (empty when between frames).
        self._partial = bytearray()
        # That frame's body size once its prefix is complete, else -1.
        self._partial_size = -1
        self._body: bytearray | None = None
        self._filled = 0
        # The unfilled rest of a large frame's body, for the next socket read to fill (then call
        # `filled`); None when no large frame is in progress: read anywhere and `feed` the bytes.
        # Read it, never set it (an attribute, as the server reads it before every read).
        self.direct: memoryview | None = None
        # Whether the last frame completed was read into a buffer of its own (a client sending
        # large Produce requests, such as kcat's ~1 MB), until a `feed` completes a frame of the
        # data fed: the reader then reads in smaller pieces, so that the start of the client's
        # next large frame, copied out of the shared buffer, is small. Read it, never set it.
        self.large_frames = False
        # The framing error found after the frames the last `feed` returned, if any (read it,
        # never set it): an attribute, not a property, as the server reads it after every read.
        self.failed: InvalidReceiveError | None = None

    @property
    def max_frame_bytes(self) -> int:
        return self._max_frame_bytes

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (prefix included)."""
        if self._body is not None:
            return SIZE_PREFIX_BYTES + self._filled
        return len(self._partial)

    @property
    def pending_frame_size(self) -> int | None:
        """The announced body size of the incomplete frame, if its prefix has arrived."""
        if self._body is not None:
            return len(self._body)
        return self._partial_size if self._partial_size >= 0 else None

    def filled(self, nbytes: int) -> list[memoryview]:
        """`nbytes` were read into `direct`: the frame, once complete."""
        body = self._body
        self._filled += nbytes
        if self._filled < len(body):
            self.direct = self.direct[nbytes:]
            return []
        self._body = self.direct = None
        self.large_frames = True
        return [memoryview(body).toreadonly()]

    def feed(self, data: bytes | bytearray | memoryview, *, lent: bool = False) -> list[memoryview]:
        """Take the next bytes of the stream; return the frames they complete (bodies, no prefix).

        The returned views point into `data` when it is `bytes`, or `lent`: the caller will not
        write those bytes again while a view of them lives (server/read_buffers.py). Any other
        buffer, which the caller may reuse, is copied first (from the first frame wholly inside it
        on).
        """
        if self.failed is not None:
            raise self.failed
        stable = lent or type(data) is bytes  # views of it may be handed out
        view = memoryview(data)
        end = view.nbytes
        pos = 0
        frames: list[memoryview] = []

        if self._body is not None:
            # A large frame's body arrived as fed bytes (TLS plaintext) rather than a direct read.
            take = min(len(self._body) - self._filled, end)
            self._body[self._filled:self._filled + take] = view[:take]
            pos = take
            frames += self.filled(take)
            if self._body is not None:
                return frames

        partial = self._partial
        if partial:
            # Finish the frame started by earlier reads, copying only the bytes it still needs.
            if self._partial_size < 0:
                take = min(SIZE_PREFIX_BYTES - len(partial), end - pos)
                partial += view[pos:pos + take]
                pos += take
                if len(partial) < SIZE_PREFIX_BYTES:
                    return frames
                self._partial_size = self._check_size(_SIZE.unpack_from(partial, 0)[0])
            need = SIZE_PREFIX_BYTES + self._partial_size - len(partial)
            take = min(need, end - pos)
            partial += view[pos:pos + take]
            pos += take
            if take < need:
                if self._reads_directly(len(partial) - SIZE_PREFIX_BYTES):
                    self._start_body(memoryview(partial)[SIZE_PREFIX_BYTES:])
                    self._partial = bytearray()
                return frames
            frames.append(memoryview(partial)[SIZE_PREFIX_BYTES:].toreadonly())
            # That bytearray now belongs to the view just handed out; never resize it again.
            self._partial = partial = bytearray()
            self._partial_size = -1

        # Frames lying wholly in `data`: views, no copies (but the one below).
        unpack = _SIZE.unpack_from
        max_size = self._max_frame_bytes
        while end - pos >= SIZE_PREFIX_BYTES:
            (size,) = unpack(view, pos)
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
            if not stable:  # the caller reuses its buffer: one copy of the rest, the frames share it
                view = memoryview(bytes(view[pos:end]))
                start, stop, end, pos = start - pos, stop - pos, end - pos, 0
                stable = True
            frames.append(view[start:stop])
            pos = stop
            self.large_frames = False

        if pos < end:
            if self._partial_size >= 0 and self._reads_directly(end - pos - SIZE_PREFIX_BYTES):
                self._start_body(view[pos + SIZE_PREFIX_BYTES:end])
            else:
                partial += view[pos:end]
        return frames

    def _reads_directly(self, received: int) -> bool:
        """Whether the incomplete frame, `received` bytes of its body here, is to get a buffer of
        its own size for the socket to fill: enough of it is still to come, and enough is here."""
        size = self._partial_size
        return size - received >= DIRECT_READ_BYTES and received * DIRECT_READ_SHARE >= size

    def _start_body(self, received: memoryview) -> None:
        """Give the incomplete frame its own buffer, holding the body bytes `received` so far."""
        body = self._body = _frame_buffer(self._partial_size)
        n = received.nbytes
        body[:n] = received
        self._filled = n
        self.direct = memoryview(body)[n:]
        self._partial_size = -1

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


_new_bytearray = None


def _frame_buffer(size: int) -> bytearray:
    """A bytearray of `size` bytes whose content is whatever the allocator left there.

    `bytearray(size)` zero-fills what the socket is about to overwrite: for kcat's ~1 MB Produce
    that was ~16 µs a request, 3-4% of the broker's CPU (perf). CPython has no Python spelling for
    an uninitialised bytearray, so this calls its C API through ctypes. Safe because a frame body
    is handed out only once every byte of it has been read in (`filled`)."""
    global _new_bytearray
    if _new_bytearray is None:
        import ctypes

        new = ctypes.pythonapi.PyByteArray_FromStringAndSize  # a new reference: py_object takes it
        new.argtypes, new.restype = (ctypes.c_void_p, ctypes.c_ssize_t), ctypes.py_object
        _new_bytearray = new
    return _new_bytearray(None, size)
