"""Matmul products computed on worker threads while the executor goes on: more than one core at work.

A matmul instruction's product (BLAS, which releases the GIL) is handed to a worker; storing it
(PSUM accumulation, written flags, the memory's caches) is deferred and done by the executing
thread strictly in program order, so every PSUM tile adds the same values in the same order as
when each matmul runs at once: the same bits. Workers only multiply.

Hazards, by allocation id: an instruction reading or writing an allocation a pending matmul
writes first retires the pending matmuls in order up to the last one that writes it; one writing
an allocation a pending product reads (its operands may be views of the tile, not copies) first
retires up to the last such reader. A matmul's own operands are checked like any read; its own
destination needs nothing more, as its store retires after every earlier one.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor


class Pending:
    """Products in flight, oldest first; `store(item, product)` retires one (on this thread)."""

    def __init__(self, threads: int, store, limit: int) -> None:
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=threads,
                                                                   thread_name_prefix="nkisim-matmul")
        self._store = store
        self._limit = limit
        self._queue: deque = deque()     # (sequence number, item, future, (multiply, rec, values))
        self._next = 0                   # sequence number of the next product
        self._retired = 0                # every product numbered below this is stored
        self._writes: dict[int, int] = {}    # allocation id: the last pending product storing into it
        self._reads: dict[int, int] = {}     # allocation id: the last pending product reading it

    def __bool__(self) -> bool:
        return bool(self._queue)

    def submit(self, item, regions_written, regions_read, multiply, rec, values) -> None:
        """Compute multiply(rec, values) on a worker; `item` is what `store` gets back with it."""
        if len(self._queue) >= self._limit:      # bounded: products are a tile's size each
            self.retire_through(self._queue[0][0])
        seq = self._next
        self._next += 1
        self._queue.append((seq, item, self._start(multiply, rec, values), (multiply, rec, values)))
        for r in regions_written:
            self._writes[r.alloc_id] = seq
        for r in regions_read:
            self._reads[r.alloc_id] = seq

    def _start(self, multiply, rec, values) -> Future:
        if self._pool is not None:
            try:
                return self._pool.submit(multiply, rec, values)
            except RuntimeError:     # no thread could start (a process cap): multiply here from now on
                self._pool.shutdown(wait=False)
                self._pool = None
        return _here(multiply, rec, values)

    def before_read(self, regions) -> None:
        """Retire what must be stored before `regions` are read (a pending write to them)."""
        last, writes = -1, self._writes
        for r in regions:
            seq = writes.get(r.alloc_id, -1)
            if seq > last:
                last = seq
        if last >= self._retired:
            self.retire_through(last)

    def before_write(self, regions) -> None:
        """Retire what must be done before `regions` are written: pending writes to them (kept
        in program order) and pending products reading them."""
        last, writes, reads = -1, self._writes, self._reads
        for r in regions:
            alloc_id = r.alloc_id
            seq = max(writes.get(alloc_id, -1), reads.get(alloc_id, -1))
            if seq > last:
                last = seq
        if last >= self._retired:
            self.retire_through(last)

    def before_release(self, alloc_id: int) -> None:
        """A pending store into an allocation about to be freed is made first (it would bring
        the allocation back). Products reading it hold its memory themselves."""
        if self._writes.get(alloc_id, -1) >= self._retired:
            self.retire_through(self._writes[alloc_id])

    def retire_through(self, seq: int) -> None:
        """Store every pending product numbered up to `seq`, in order; a product's error is
        raised by `store` when its turn comes, as if it had run then."""
        queue = self._queue
        while queue and queue[0][0] <= seq:
            number, item, future, call = queue.popleft()
            self._retired = number + 1
            if future.cancel():         # no worker took it yet: multiply here rather than sleep
                future = _here(*call)
            try:
                self._store(item, future)
            except BaseException:
                self._drop()            # later products never count: execution ends here
                raise
        if not queue:
            self._writes.clear()
            self._reads.clear()

    def retire_all(self) -> None:
        if self._queue:
            self.retire_through(self._queue[-1][0])

    def _drop(self) -> None:
        for entry in self._queue:
            entry[2].cancel()
        self._queue.clear()

    def close(self) -> None:
        """Drop what is still pending (after an error) and stop the workers."""
        self._drop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _here(multiply, rec, values) -> Future:
    """multiply(rec, values) on this thread, as a done future; its error is raised when its turn
    to be stored comes, as a worker's would be."""
    future = Future()
    try:
        future.set_result(multiply(rec, values))
    except Exception as err:
        future.set_exception(err)
    return future
