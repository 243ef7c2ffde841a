"""Where the connections of a server read: an arena whose large reads are lent to the frames they
hold, and a scratch buffer that is copied out of.

A Produce of ~64 KiB (confluent-kafka's usual request) arrives whole in one read. Copying it out of
a buffer that the next read overwrites was ~5% of the broker's CPU in perf, and with the copy's
128 KiB through the caches, 7-10% of its CPU per GB produced (measured with
bench/bench_cpu_per_gb.py). So a read goes into free space of the arena, and when it is LEND_READ_BYTES or more,
the frames in it are views of the arena itself: the space is lent to them (`lend`) and later
reads go past it. Before each read the arena starts over from its beginning if no view of it is
alive (`_rewind`): the usual case, since a Produce is appended before its read is done with, so
reads keep landing in the same cache-warm space. A frame that a handler still holds (a request
waiting in a purgatory) keeps what it views: reads go past it while there is room, then into the
scratch buffer, copied out as every read was before, until the frame lets go. So the arena is
never replaced, memory stays bounded (one arena and one scratch buffer per server), and a frame's
bytes are never overwritten while it lives.

Smaller reads are copied out of whatever space they were read into and take none of it: copying a
few KiB is cheap, and a small request may be held long (a consumer's long poll: 500 ms), which
would keep the arena from starting over. TLS reads are copied too (the plaintext is a new buffer
anyway).

Whether a view of the arena is alive is asked of the arena: a bytearray cannot change size while
a buffer of it is exported (PEP 3118; CPython raises BufferError), and every frame made of it is
a memoryview of it. The event loop calls `buffer_updated` right after the read that filled the
space, before any other read, so one arena serves every connection of the server.

Invariant: no read is offered arena bytes that a live frame views.
"""

from __future__ import annotations

import mmap

LEND_READ_BYTES = 16384  # a read this large is lent arena space; a smaller one is copied out


class ReadBuffers:
    """A server's read space: `space()` before each socket read, `received(n)` after it, `lend(n)`
    when frames were made of those bytes without a copy. A read takes up to `read_bytes`, or
    `short_read_bytes` when asked for a short one. Event loop only."""

    __slots__ = ("_scratch", "_scratch_short", "_arena", "_pos", "_in_arena")

    def __init__(self, read_bytes: int, short_read_bytes: int) -> None:
        # An anonymous mapping, not a bytearray: its pages are resident only once reads reach them.
        self._scratch = memoryview(mmap.mmap(-1, read_bytes))
        self._scratch_short = self._scratch[:short_read_bytes]
        self._arena: bytearray | None = None  # made at the first read that could have been lent
        self._pos = 0  # reads go here; below it, space lent to frames that may still live
        self._in_arena = False  # whether the last space offered was the arena's

    def space(self, short: bool, lendable: bool) -> memoryview:
        """Writable room for the next read, `short` or not: free arena space when there is enough
        and the read may be `lendable`, else the scratch buffer."""
        scratch = self._scratch_short if short else self._scratch
        arena = self._arena  # None until a read was large enough to be lent
        if lendable and arena is not None and (self._pos == 0 or self._rewind(arena)
                                               or len(arena) - self._pos >= len(scratch)):
            self._in_arena = True
            return memoryview(arena)[self._pos:self._pos + len(scratch)]
        self._in_arena = False
        return scratch

    def received(self, nbytes: int) -> tuple[memoryview, bool]:
        """The `nbytes` just read into the last space offered (read-only), and whether they may be
        lent (`lend`): arena space, and a read of LEND_READ_BYTES or more. Bytes that are not lent
        are valid only until the next read."""
        if self._in_arena:
            view = memoryview(self._arena)[self._pos:self._pos + nbytes].toreadonly()
            return view, nbytes >= LEND_READ_BYTES
        if nbytes >= LEND_READ_BYTES and self._arena is None:
            self._arena = bytearray(2 * len(self._scratch))  # the next large read will go there
        return self._scratch[:nbytes], False

    def lend(self, nbytes: int) -> None:
        """The `nbytes` of the last read, which `received` said may be lent, are held by frames:
        later reads go past them."""
        self._pos += nbytes

    def _rewind(self, arena: bytearray) -> bool:
        """Start the arena over if no frame views any of it (see the module docstring)."""
        try:
            arena.append(0)
        except BufferError:
            return False
        del arena[-1]
        self._pos = 0
        return True
