package io.github.sockmap4j.colocated;

import io.github.sockmap4j.linux.ffi.Epoll;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.SharedMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * One direction of a shared region: a single-writer, single-reader ring of messages in memory
 * that two processes map. One process holds the {@link Writer}, the other the {@link Reader};
 * each keeps its own position privately and reads the other's from the shared control block
 * only to learn how far it may go, checking it first.
 *
 * <pre>
 * control block (256 bytes; each field on a cache line of its own)
 *   0    tail: bytes published (the writer's)       64   head: bytes consumed (the reader's)
 *   128  reader asleep (int), 132 data signal (int), 136 borrower (int), 140 borrower's signal (int)
 *   192  writer asleep (int), 196 space signal (int)
 * data: capacity bytes, a power of two; records 8-byte aligned, never across the end:
 *   int length, int kind (KIND_PADDING: the rest of the data area is skipped), length bytes
 * </pre>
 *
 * <p>A sleeping side waits on its signal word with a futex, having said so first; the other side,
 * after publishing, wakes it only if it said so: a busy pair makes no system call, and a
 * sleeping one is woken once a batch, not once a message.
 *
 * <p>The reading end may be lent for a while to another thread of the reader's process (a caller
 * that waits for its own reply reads it, instead of being handed it by the reader's thread): the
 * borrower says so in a word of its own and sleeps on a signal of its own, and while it holds the
 * ring the writer wakes only the borrower, never the reader's thread asleep beside it. Who holds
 * the reading end is the reader's process's to order (one at a time); the writer only reads the
 * word.
 *
 * <p>A ring may have a bell: an eventfd both processes hold (handed over with the region), which a
 * reader that waits in an event loop's epoll set instead of on the futex listens to. Such a reader
 * says so with {@link #ON_BELL} in its asleep word ({@link Reader#sleepOnBell}); a writer that
 * finds that value raises the bell instead of waking the futex, once a batch as before. Which way
 * to wait is the reader's choice, made each time it sleeps; the writer only follows the word.
 */
public final class MessageRing {
    public static final long CONTROL_BYTES = 256;
    /** The record kind that fills the data area's end where the next record does not fit. */
    public static final int KIND_PADDING = -1;
    static final int RECORD_HEADER = 8;
    private static final long TAIL = 0;
    private static final long HEAD = 64;
    private static final long READER_ASLEEP = 128;
    /** The reader's asleep word's values: awake; asleep on the data signal's futex; waiting for the bell. */
    private static final int AWAKE = 0;
    private static final int ON_FUTEX = 1;
    /** The reader waits for the ring's bell ({@link Reader#sleepOnBell}). */
    static final int ON_BELL = 2;
    private static final long DATA_SIGNAL = 132;
    private static final long BORROWER = 136;
    private static final long BORROWER_SIGNAL = 140;
    /** {@link #BORROWER}'s values: no borrower; one that reads; one that sleeps on its signal. */
    private static final int NO_BORROWER = 0;
    private static final int BORROWER_AWAKE = 1;
    private static final int BORROWER_ASLEEP = 2;
    private static final long WRITER_ASLEEP = 192;
    private static final long SPACE_SIGNAL = 196;
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    /** Batches this process's writers ended ({@link Writer#wakeIfAsleep} that published something), all rings. */
    private static final java.util.concurrent.atomic.LongAdder BATCHES = new java.util.concurrent.atomic.LongAdder();

    private final String name;
    private final MemorySegment control;
    private final MemorySegment data;
    private final MemorySegment dataSignal;
    private final MemorySegment spaceSignal;
    private final MemorySegment borrowerSignal;
    private final long capacity;
    private final long mask;
    private final int maxMessage;
    /** The bell's eventfd, or -1: none (set by the region before either end is handed out; -1 again once closed). */
    private volatile int bell = -1;

    /**
     * The ring laid out at the start of {@code memory}: {@link #CONTROL_BYTES} of control, then
     * {@code capacity} bytes of data. {@code name} names it in errors.
     */
    MessageRing(String name, MemorySegment memory, long capacity) {
        checkCapacity(capacity);
        this.name = name;
        this.control = memory.asSlice(0, CONTROL_BYTES);
        this.data = memory.asSlice(CONTROL_BYTES, capacity);
        this.dataSignal = control.asSlice(DATA_SIGNAL, 4);
        this.spaceSignal = control.asSlice(SPACE_SIGNAL, 4);
        this.borrowerSignal = control.asSlice(BORROWER_SIGNAL, 4);
        this.capacity = capacity;
        this.mask = capacity - 1;
        this.maxMessage = (int) (capacity / 4);
    }

    static void checkCapacity(long capacity) {
        if (Long.bitCount(capacity) != 1 || capacity < 4096 || capacity > (1L << 30)) {
            throw new IllegalArgumentException("a ring's capacity is a power of two from 4 KiB to 1 GiB: " + capacity);
        }
    }

    /** The bytes a ring of {@code capacity} takes in a region. */
    static long bytesFor(long capacity) {
        return CONTROL_BYTES + capacity;
    }

    /** Gives this ring the bell {@code fd} (an eventfd; -1: none, the region closed it). */
    void bell(int fd) {
        this.bell = fd;
    }

    /** The ring's bell, an eventfd its reader may wait on in an epoll set; -1 where it has none. */
    public int bell() {
        return bell;
    }

    /** Raises the bell if the ring has one. */
    private void ring() {
        int fd = bell;
        if (fd >= 0) {
            Epoll.signal(fd);
        }
    }

    /** The largest message one record carries: a quarter of the capacity. */
    public int maxMessage() {
        return maxMessage;
    }

    public long capacity() {
        return capacity;
    }

    static long align(long n) {
        return (n + 7) & ~7L;
    }

    /**
     * Batches this process's writers have ended with a wake (each a wake-up of the reader where it
     * slept), on every ring: what a writer that batches its messages saves shows here.
     */
    public static long batchesPublished() {
        return BATCHES.sum();
    }

    /** This ring's writing end. Not thread-safe: one writer. */
    public Writer writer() {
        return new Writer();
    }

    /** This ring's reading end, copying each message into memory of its own first. Not thread-safe: one reader. */
    public Reader reader() {
        return new Reader();
    }

    /** What a reader does with each message: {@code message} is the reader's own copy, valid until it returns. */
    @FunctionalInterface
    public interface Handler {
        void onMessage(int kind, MemorySegment message) throws Exception;
    }

    /** What a reader does with each message: {@code message} is an array of its own, the handler's to keep. */
    @FunctionalInterface
    public interface OwnedHandler {
        void onMessage(int kind, byte[] message) throws Exception;
    }

    /** How a sleep ended. */
    public enum Wake {
        /** What was waited for is there (or was on the way in). */
        READY,
        /** The timeout passed first. */
        TIMED_OUT
    }

    public final class Writer {
        /** Where the next record goes: what offers wrote, published or not. Only under the writer's lock. */
        private long tail;
        /** {@link #tail} as of the last complete record, for {@link #publish} from any thread. */
        private volatile long written;

        private Writer() {
            tail = (long) LONG.getVolatile(control, TAIL);
            written = tail;
        }

        /**
         * Appends one message of kind {@code kind >= 0} ({@code length} bytes of {@code src} from
         * {@code offset}) and wakes the reader if it sleeps; false when the ring lacks the room
         * now (see {@link #awaitSpace}).
         *
         * @throws RingCorruptException where the reader's head is not a position it could have
         * @throws IllegalArgumentException where the message exceeds {@link #maxMessage()}
         */
        public boolean offer(int kind, MemorySegment src, long offset, int length) throws RingCorruptException {
            return offer(kind, src, offset, length, true);
        }

        /**
         * As {@link #offer(int, MemorySegment, long, int)}; where {@code wake} is false the message
         * is written but neither published nor the reader woken, and the writer promises a {@link
         * #wakeIfAsleep()} (or a waking offer) that publishes it with the rest of its batch: one
         * wake-up for a batch the writer knows is coming (a call's headers, message and
         * half-close), not one for each of its messages, and the reader sees the batch whole (a
         * reply's message never without the trailers behind it), as a socket's writer that flushes
         * once sends its batch.
         */
        public boolean offer(int kind, MemorySegment src, long offset, int length, boolean wake)
                throws RingCorruptException {
            if (kind < 0 || length < 0 || length > maxMessage) {
                throw new IllegalArgumentException("a message of kind " + kind + " and " + length
                        + " bytes (the ring carries kinds >= 0 of at most " + maxMessage + " bytes)");
            }
            long record = align(RECORD_HEADER + length);
            long index = tail & mask;
            long toEnd = capacity - index;
            long needed = record <= toEnd ? record : toEnd + record;
            if (capacity - used() < needed) {
                return false;
            }
            if (record > toEnd) {
                data.set(ValueLayout.JAVA_INT, index, (int) (toEnd - RECORD_HEADER));
                data.set(ValueLayout.JAVA_INT, index + 4, KIND_PADDING);
                tail += toEnd;
                index = 0;
            }
            MemorySegment.copy(src, offset, data, index + RECORD_HEADER, length);
            data.set(ValueLayout.JAVA_INT, index, length);
            data.set(ValueLayout.JAVA_INT, index + 4, kind);
            tail += record;
            written = tail;
            if (wake) {
                wakeIfAsleep();
            }
            return true;
        }

        /**
         * Publishes what was written (the tail only grows: a thread that publishes late never takes
         * back what another published). Safe from any thread of the writer's process.
         */
        public void publish() {
            publishNew();
        }

        /** As {@link #publish}; whether this call published anything. */
        private boolean publishNew() {
            long w = written;
            long published = (long) LONG.getVolatile(control, TAIL);
            while (w > published) {
                if (LONG.compareAndSet(control, TAIL, published, w)) {
                    return true;
                }
                published = (long) LONG.getVolatile(control, TAIL);
            }
            return false;
        }

        /**
         * Publishes what was written ({@link #publish}) and wakes the reader if it said it sleeps: a
         * batch's end. A reader that said so after the last publication saw it before sleeping. Where the
         * reading end is lent ({@link Reader#borrow}), the borrower is the reader: woken if it
         * sleeps, and nobody if it reads (it looks again before it sleeps or gives the end back).
         */
        public void wakeIfAsleep() {
            if (publishNew()) {
                BATCHES.increment();
            }
            int borrower = (int) INT.getVolatile(control, BORROWER);
            if (borrower != NO_BORROWER) {
                if (borrower == BORROWER_ASLEEP) {
                    INT.getAndAdd(control, BORROWER_SIGNAL, 1);
                    SharedMemory.futexWake(borrowerSignal, 1);
                }
                return;
            }
            int asleep = (int) INT.getVolatile(control, READER_ASLEEP);
            if (asleep == ON_BELL) {
                ring();
            } else if (asleep != AWAKE) {
                INT.getAndAdd(control, DATA_SIGNAL, 1);
                SharedMemory.futexWake(dataSignal, 1);
            }
        }

        /** The bytes published and not yet consumed, as the reader's head says, checked. */
        private long used() throws RingCorruptException {
            long head = (long) LONG.getAcquire(control, HEAD);
            long used = tail - head;
            if (used < 0 || used > capacity) {
                throw new RingCorruptException(name + ": the reader's position " + head + " is not within "
                        + capacity + " bytes behind the " + tail + " written");
            }
            return used;
        }

        /** Wakes this ring's reader and any borrower, asleep or not (the writer's end is closing: they are to look). */
        public void wakeReader() {
            wakeAll();
        }

        /**
         * Sleeps until {@code length} bytes of message fit or {@code timeoutNanos} pass; the
         * reader wakes it once it has made room.
         */
        public Wake awaitSpace(int length, long timeoutNanos) throws RingCorruptException {
            long record = align(RECORD_HEADER + length);
            long toEnd = capacity - (tail & mask);
            long needed = record <= toEnd ? record : toEnd + record;
            int seen = (int) INT.getVolatile(control, SPACE_SIGNAL);
            INT.setVolatile(control, WRITER_ASLEEP, 1);
            try {
                if (capacity - used() >= needed) {
                    return Wake.READY;
                }
                int r = SharedMemory.futexWait(spaceSignal, seen, timeoutNanos);
                return r == Errno.ETIMEDOUT ? Wake.TIMED_OUT : Wake.READY;
            } finally {
                INT.setVolatile(control, WRITER_ASLEEP, 0);
            }
        }

    }

    /** Wakes whoever sleeps on the reading side: the reader's thread and a borrower. */
    private void wakeAll() {
        if ((int) INT.getVolatile(control, READER_ASLEEP) == ON_BELL) {
            ring();
        }
        INT.getAndAdd(control, DATA_SIGNAL, 1);
        SharedMemory.futexWake(dataSignal, Integer.MAX_VALUE);
        INT.getAndAdd(control, BORROWER_SIGNAL, 1);
        SharedMemory.futexWake(borrowerSignal, Integer.MAX_VALUE);
    }

    /**
     * For tests: {reader asleep, data signal, borrower, borrower's signal}; a signal grows by one a
     * wake, the borrower's word is 0 (none), 1 (reading) or 2 (asleep).
     */
    int[] readerWords() {
        return new int[] {(int) INT.getVolatile(control, READER_ASLEEP), (int) INT.getVolatile(control, DATA_SIGNAL),
                (int) INT.getVolatile(control, BORROWER), (int) INT.getVolatile(control, BORROWER_SIGNAL)};
    }

    public final class Reader {
        private final MemorySegment copy;
        private long head;

        private Reader() {
            copy = Arena.ofAuto().allocate(Math.max(maxMessage, 8), 8);
            head = (long) LONG.getVolatile(control, HEAD);
        }

        /**
         * Hands each message published so far (at most {@code limit}) to {@code handler}, in
         * order, each copied first into this reader's own memory and checked against the ring's
         * bounds before that; then tells the writer how far it read and wakes it if it sleeps.
         * How many messages it handed over.
         *
         * @throws RingCorruptException where a record or the writer's tail cannot be what a
         * writer of this ring published; nothing past the data area was read
         */
        public int poll(Handler handler, int limit) throws Exception {
            return poll(handler, null, limit);
        }

        /**
         * As {@link #poll(Handler, int)}, each message copied (once) into an array of its own,
         * which the handler keeps: for a reader that holds on to what it reads.
         */
        public int pollOwned(OwnedHandler handler, int limit) throws Exception {
            return poll(null, handler, limit);
        }

        private int poll(Handler handler, OwnedHandler owned, int limit) throws Exception {
            long tail = (long) LONG.getAcquire(control, TAIL);
            long available = tail - head;
            if (available < 0 || available > capacity) {
                throw new RingCorruptException(name + ": the writer's tail " + tail + " is not within " + capacity
                        + " bytes ahead of the " + head + " read");
            }
            int n = 0;
            long start = head;
            try {
                while (available > 0 && n < limit) {
                    long index = head & mask;
                    long toEnd = capacity - index;
                    int length = data.get(ValueLayout.JAVA_INT, index);
                    int kind = data.get(ValueLayout.JAVA_INT, index + 4);
                    if (kind == KIND_PADDING) {
                        if (length != toEnd - RECORD_HEADER || toEnd > available) {
                            throw new RingCorruptException(name + ": padding of " + length + " bytes at " + index
                                    + " where " + (toEnd - RECORD_HEADER) + " remain of " + available + " published");
                        }
                        head += toEnd;
                        available -= toEnd;
                        continue;
                    }
                    long record = align(RECORD_HEADER + (long) length);
                    if (kind < 0 || length < 0 || length > maxMessage || record > toEnd || record > available) {
                        throw new RingCorruptException(name + ": a record of kind " + kind + " and " + length
                                + " bytes at " + index + ", where " + Math.min(toEnd, available)
                                + " bytes were published before the end");
                    }
                    if (owned != null) {
                        byte[] message = new byte[length];
                        MemorySegment.copy(data, ValueLayout.JAVA_BYTE, index + RECORD_HEADER, message, 0, length);
                        head += record;
                        available -= record;
                        n++;
                        owned.onMessage(kind, message);
                        continue;
                    }
                    MemorySegment.copy(data, index + RECORD_HEADER, copy, 0, length);
                    head += record;
                    available -= record;
                    n++;
                    handler.onMessage(kind, copy.asSlice(0, length));
                }
            } finally {
                if (head != start) {
                    LONG.setVolatile(control, HEAD, head);
                    if ((int) INT.getVolatile(control, WRITER_ASLEEP) != 0) {
                        INT.getAndAdd(control, SPACE_SIGNAL, 1);
                        SharedMemory.futexWake(spaceSignal, 1);
                    }
                }
            }
            return n;
        }

        /**
         * Ends a sleep in {@link #awaitMessages} of this reader's thread now (a close from another
         * thread of this process: the reader then sees the end its connection keeps).
         */
        public void interrupt() {
            wakeAll();
        }

        /**
         * Lends this reading end to the calling thread until {@link #giveBack}: from here the
         * writer wakes the borrower (asleep in {@link #awaitAsBorrower}), not a thread asleep in
         * {@link #awaitMessages}. The caller makes sure that only it reads meanwhile.
         */
        public void borrow() {
            INT.setVolatile(control, BORROWER, BORROWER_AWAKE);
        }

        /**
         * Ends the loan: from here the writer wakes the reader again. What the writer published
         * while it saw the borrower awake woke nobody: the caller looks ({@link #hasMessages})
         * after this, and wakes the reader's thread for it.
         */
        public void giveBack() {
            INT.setVolatile(control, BORROWER, NO_BORROWER);
        }

        /**
         * As {@link #awaitMessages(long, java.util.function.BooleanSupplier)}, for the borrower
         * ({@link #borrow}), on its own signal: the writer wakes it, and a thread asleep in {@link
         * #awaitMessages} sleeps on.
         */
        public Wake awaitAsBorrower(long timeoutNanos, java.util.function.BooleanSupplier stop) {
            return sleep(BORROWER, BORROWER_ASLEEP, BORROWER_AWAKE, BORROWER_SIGNAL, borrowerSignal, timeoutNanos, stop);
        }

        /**
         * Says that this reader now waits for the ring's bell (in an epoll set), not on the futex:
         * from here a writer that publishes raises the bell, once, until {@link #awake}. The
         * caller looks again ({@link #hasMessages}, and what else it waits for) after this, as
         * {@link #awaitMessages} does before it sleeps: what was published before came without a
         * bell. Only where the ring has a bell.
         */
        public void sleepOnBell() {
            if (bell < 0) {
                throw new IllegalStateException(name + " has no bell");
            }
            INT.setVolatile(control, READER_ASLEEP, ON_BELL);
        }

        /** Says that this reader reads: writers publish without waking anyone until it sleeps again. */
        public void awake() {
            INT.setVolatile(control, READER_ASLEEP, AWAKE);
        }

        /** Whether a message (or padding) is published and not yet read. */
        public boolean hasMessages() {
            return (long) LONG.getVolatile(control, TAIL) != head;
        }

        /**
         * Sleeps until something is published or {@code timeoutNanos} pass (or {@link
         * #interrupt} is called); the writer wakes it once.
         */
        public Wake awaitMessages(long timeoutNanos) {
            return awaitMessages(timeoutNanos, () -> false);
        }

        /**
         * As {@link #awaitMessages(long)}, and not asleep at all where {@code stop} holds once this
         * reader has said it sleeps: a condition whose change comes with a wake of this reader
         * ({@link #interrupt}, the other end's {@link Writer#wakeReader}) is never missed.
         */
        public Wake awaitMessages(long timeoutNanos, java.util.function.BooleanSupplier stop) {
            return sleep(READER_ASLEEP, ON_FUTEX, AWAKE, DATA_SIGNAL, dataSignal, timeoutNanos, stop);
        }

        /**
         * Says so in {@code word} ({@code asleep}), looks once more, and waits on the signal at
         * {@code signal} unless something came or {@code stop} holds; {@code word} is {@code awake}
         * again after. The signal is read before the word is set, so a wake in between is not lost.
         */
        private Wake sleep(long word, int asleep, int awake, long signal, MemorySegment signalWord, long timeoutNanos,
                           java.util.function.BooleanSupplier stop) {
            int seen = (int) INT.getVolatile(control, signal);
            INT.setVolatile(control, word, asleep);
            try {
                if (hasMessages() || stop.getAsBoolean()) {
                    return Wake.READY;
                }
                int r = SharedMemory.futexWait(signalWord, seen, timeoutNanos);
                return r == Errno.ETIMEDOUT ? Wake.TIMED_OUT : Wake.READY;
            } finally {
                INT.setVolatile(control, word, awake);
            }
        }
    }
}
