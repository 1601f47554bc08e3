package io.github.sockmap4j.colocated;

import io.github.sockmap4j.linux.ffi.Epoll;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SharedMemory;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The memory the two ends of one co-located connection share: a sealed anonymous file (see
 * {@link SharedMemory}) holding a header and two {@link MessageRing}s, the opener's way first:
 *
 * <pre>
 * 0   magic "SM4JCOLO" (long)   8  version (int)   12 ring count, 2 (int)   16 ring capacity (long)
 * 24  closed by the creator (int)   28  closed by the opener (int)   32  heap bytes (long; 0: none)
 * 64  ring 0: written by the creator, read by the opener
 * 64 + 256 + capacity   ring 1: written by the opener, read by the creator
 * heap: from the next 4 KiB boundary after ring 1, heap bytes, where there is a heap
 * </pre>
 *
 * <p>The heap is memory for what an end lends the other by reference (Arrow batches, message
 * bodies, whose places a ring message names): who writes where is the protocol's (the Arrow
 * bridge's creator lends into all of it; co-located gRPC gives each end a half), and each end
 * allocates with bookkeeping kept in its own memory, never in the region, so nothing the other
 * end writes there can steer its allocations; a reader checks every place it is told of against
 * the bounds of the part that end may write.
 * A region without a heap is laid out byte for byte as before there was one.
 *
 * <p>A region may come with bells, one eventfd a ring ({@link MessageRing#bell}), which the creator
 * makes and hands over with the region: a reader that waits in an event loop's epoll set listens
 * to its ring's bell instead of the futex. The opener takes only eventfds that do not block.
 *
 * The creator makes it ({@link #create}) and hands the descriptor to the peer; the opener maps it
 * ({@link #open}) only if it is sealed, of the size the capacity agreed over the connection gives,
 * and laid out as that capacity says, and refuses it otherwise with what was wrong. Closing unmaps
 * it and closes the descriptor; the memory goes when both processes have.
 */
public final class SharedRegion implements AutoCloseable {
    static final long MAGIC = 0x4F4C4F434A344D53L; // "SM4JCOLO", little-endian
    /** 2: the rings' control blocks have a borrower's word and signal (a version-1 writer would never wake a borrower). */
    public static final int VERSION = 2;
    static final long HEADER_BYTES = 64;
    private static final long CLOSED_BY_CREATOR = 24;
    private static final long CLOSED_BY_OPENER = 28;
    private static final long HEAP_BYTES = 32;
    private static final long PAGE = 4096;
    /** The largest heap a region has: 64 GiB. */
    public static final long MAX_HEAP = 1L << 36;
    private static final java.lang.invoke.VarHandle CLOSED = ValueLayout.JAVA_INT.varHandle();

    private final Arena arena;
    private final int fd;
    private final MemorySegment memory;
    private final MessageRing toOpener;
    private final MessageRing toCreator;
    private final boolean creator;
    private final MemorySegment heap;
    /** The bells: ring 0's, ring 1's; empty where none. */
    private final int[] bells;

    private SharedRegion(Arena arena, int fd, MemorySegment memory, long capacity, long heapBytes, boolean creator,
                         int[] bells) {
        this.arena = arena;
        this.fd = fd;
        this.bells = bells;
        this.memory = memory;
        this.creator = creator;
        long ring = MessageRing.bytesFor(capacity);
        this.toOpener = new MessageRing("ring to the opener", memory.asSlice(HEADER_BYTES, ring), capacity);
        this.toCreator = new MessageRing("ring to the creator", memory.asSlice(HEADER_BYTES + ring, ring), capacity);
        this.heap = heapBytes == 0 ? memory.asSlice(0, 0) : memory.asSlice(heapStart(capacity), heapBytes);
        if (bells.length == 2) {
            toOpener.bell(bells[0]);
            toCreator.bell(bells[1]);
        }
    }

    /** The file size of a region whose rings hold {@code capacity} bytes each, without a heap. */
    public static long sizeFor(long capacity) {
        return HEADER_BYTES + 2 * MessageRing.bytesFor(capacity);
    }

    /** The file size of a region with rings of {@code capacity} and a heap of {@code heapBytes} (0: none). */
    public static long sizeFor(long capacity, long heapBytes) {
        return heapBytes == 0 ? sizeFor(capacity) : heapStart(capacity) + heapBytes;
    }

    private static long heapStart(long capacity) {
        return (sizeFor(capacity) + PAGE - 1) & -PAGE;
    }

    private static void checkHeap(long heapBytes) {
        if (heapBytes < 0 || heapBytes > MAX_HEAP || heapBytes % PAGE != 0) {
            throw new IllegalArgumentException("a region's heap is a multiple of 4 KiB from 0 to 64 GiB: " + heapBytes);
        }
    }

    /** A new region of two rings of {@code capacity} bytes (a power of two, 4 KiB to 1 GiB). */
    public static SharedRegion create(String name, long capacity) throws IOException {
        return create(name, capacity, 0);
    }

    /**
     * A new region of two rings of {@code capacity} bytes and a heap of {@code heapBytes} (a
     * multiple of 4 KiB; 0: none). The file's pages are taken as they are first written, so a
     * heap costs memory for what is put in it, not for its size.
     */
    public static SharedRegion create(String name, long capacity, long heapBytes) throws IOException {
        return create(name, capacity, heapBytes, false);
    }

    /**
     * As {@link #create(String, long, long)}, with a bell for each ring where {@code bells}: two
     * eventfds more, handed over with the region ({@link #bells}).
     */
    public static SharedRegion create(String name, long capacity, long heapBytes, boolean bells) throws IOException {
        MessageRing.checkCapacity(capacity);
        checkHeap(heapBytes);
        long size = sizeFor(capacity, heapBytes);
        int fd = SharedMemory.createSealed(name, size);
        Arena arena = Arena.ofShared();
        int[] made = new int[0];
        try {
            if (bells) {
                made = new int[] {Epoll.eventfd(), -1};
                made[1] = Epoll.eventfd();
            }
            MemorySegment m = SharedMemory.openSealed(fd, size, arena);
            m.set(ValueLayout.JAVA_LONG, 0, MAGIC);
            m.set(ValueLayout.JAVA_INT, 8, VERSION);
            m.set(ValueLayout.JAVA_INT, 12, 2);
            m.set(ValueLayout.JAVA_LONG, 16, capacity);
            m.set(ValueLayout.JAVA_LONG, HEAP_BYTES, heapBytes);
            return new SharedRegion(arena, fd, m, capacity, heapBytes, true, made);
        } catch (IOException | RuntimeException e) {
            arena.close();
            LibC.close(fd);
            closeAll(made);
            throw e;
        }
    }

    private static void closeAll(int[] fds) {
        for (int b : fds) {
            if (b >= 0) {
                LibC.close(b);
            }
        }
    }

    /**
     * Maps a region a peer made, given its descriptor (this region owns it from here, also when
     * refused) and the ring capacity the two ends agreed on.
     *
     * @throws IOException naming what is wrong: not sealed, another size, not a region of this
     * version or layout
     */
    public static SharedRegion open(int fd, long capacity) throws IOException {
        return open(fd, capacity, 0);
    }

    /**
     * As {@link #open(int, long)}, taking a heap of at most {@code maxHeap} bytes too (its size is
     * the file's beyond the rings, which the header must say as well): a region with a larger heap
     * is refused, so a peer cannot make this process map more than it agreed to.
     */
    public static SharedRegion open(int fd, long capacity, long maxHeap) throws IOException {
        return open(fd, capacity, maxHeap, new int[0]);
    }

    /**
     * As {@link #open(int, long, long)}, with the rings' bells that came with it (none, or two:
     * ring 0's and ring 1's), which this region owns from here too, also when refused: each must
     * be an eventfd that does not block (a writer raises it while it holds its ring; a pipe or a
     * socket there could stop it), or the region is refused.
     */
    public static SharedRegion open(int fd, long capacity, long maxHeap, int[] bells) throws IOException {
        Arena arena = Arena.ofShared();
        try {
            if (bells.length != 0 && bells.length != 2) {
                throw new IOException(bells.length + " bells came with the region; a region has none or two: refused");
            }
            for (int b : bells) {
                checkBell(b);
            }
            MessageRing.checkCapacity(capacity);
            checkHeap(maxHeap);
            long size = SharedMemory.size(fd);
            long heapBytes = size <= sizeFor(capacity) ? 0 : size - heapStart(capacity);
            if (heapBytes < 0 || heapBytes > maxHeap || heapBytes % PAGE != 0) {
                throw new IOException("the shared region is " + size + " bytes: not two rings of " + capacity
                        + " bytes with a heap of at most " + maxHeap + " bytes: refused");
            }
            MemorySegment m = SharedMemory.openSealed(fd, sizeFor(capacity, heapBytes), arena);
            long magic = m.get(ValueLayout.JAVA_LONG, 0);
            int version = m.get(ValueLayout.JAVA_INT, 8);
            int rings = m.get(ValueLayout.JAVA_INT, 12);
            long cap = m.get(ValueLayout.JAVA_LONG, 16);
            long heapSaid = m.get(ValueLayout.JAVA_LONG, HEAP_BYTES);
            if (magic != MAGIC || version != VERSION || rings != 2 || cap != capacity || heapSaid != heapBytes) {
                throw new IOException("not a co-located region of version " + VERSION + " with two rings of "
                        + capacity + " bytes and a heap of " + heapBytes + " (magic 0x" + Long.toHexString(magic)
                        + ", version " + version + ", " + rings + " rings of " + cap + " bytes, a heap of "
                        + heapSaid + "): refused");
            }
            return new SharedRegion(arena, fd, m, capacity, heapBytes, false, bells.clone());
        } catch (IOException | RuntimeException e) {
            arena.close();
            LibC.close(fd);
            closeAll(bells);
            throw e;
        }
    }

    /** Refuses a bell that is not an eventfd, or one whose raise could block. */
    private static void checkBell(int fd) throws IOException {
        String what;
        String flags = null;
        try {
            what = java.nio.file.Files.readSymbolicLink(java.nio.file.Path.of("/proc/self/fd/" + fd)).toString();
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/fdinfo/" + fd))) {
                if (line.startsWith("flags:")) {
                    flags = line.substring(6).trim();
                }
            }
        } catch (IOException e) {
            throw new IOException("a bell that came with the region could not be looked at (" + e.getMessage()
                    + "): refused", e);
        }
        if (!what.equals("anon_inode:[eventfd]")) {
            throw new IOException("a bell that came with the region is " + what + ", not an eventfd: refused");
        }
        if (flags == null || (Integer.parseInt(flags, 8) & Linux.O_NONBLOCK) == 0) {
            throw new IOException("a bell that came with the region blocks (flags " + flags + "): refused");
        }
    }

    /** The bells to hand over with the region: ring 0's and ring 1's, or none (this region keeps its own). */
    public int[] bells() {
        return bells.clone();
    }

    /**
     * Descriptors of its own for the bells, which the caller owns: what the peer's end opens when
     * both ends are in this process ({@link #descriptorForPeer}).
     */
    public int[] bellsForPeer() throws IOException {
        int[] copies = new int[bells.length];
        for (int i = 0; i < bells.length; i++) {
            copies[i] = SharedMemory.dupCloexec(bells[i]);
        }
        return copies;
    }

    /** The descriptor to hand to the peer (this region keeps its own). */
    public int fd() {
        return fd;
    }

    /**
     * A descriptor of its own for the same file, which the caller owns: what the peer's end
     * opens when both ends are in this process (a descriptor passed to another process with
     * SCM_RIGHTS is that process's own already).
     */
    public int descriptorForPeer() throws IOException {
        return SysCalls.open("/proc/self/fd/" + fd, Linux.O_RDWR | Linux.O_CLOEXEC, 0);
    }

    /**
     * Says to the other end that this end is done (a word in the header it reads) and wakes its
     * reader: a close it learns of without a frame, which a broken ring could not carry.
     */
    public void markClosed() {
        CLOSED.setVolatile(memory, creator ? CLOSED_BY_CREATOR : CLOSED_BY_OPENER, 1);
        outbound().writer().wakeReader();
    }

    /** Whether the other end said it is done ({@link #markClosed}). */
    public boolean peerClosed() {
        return (int) CLOSED.getVolatile(memory, creator ? CLOSED_BY_OPENER : CLOSED_BY_CREATOR) != 0;
    }

    /** The ring this end writes. */
    public MessageRing outbound() {
        return creator ? toOpener : toCreator;
    }

    /** The ring this end reads. */
    public MessageRing inbound() {
        return creator ? toCreator : toOpener;
    }

    /**
     * The heap (empty where the region has none): written by the end or ends its protocol says,
     * read where a ring message points, each place checked against the writer's bounds first.
     */
    public MemorySegment heap() {
        return heap;
    }

    /** Whether this end made the region (else it opened what the other end handed over). */
    public boolean isCreator() {
        return creator;
    }

    /** The whole mapping (for tests that play a peer that writes what it likes). */
    MemorySegment memory() {
        return memory;
    }

    @Override
    public void close() {
        toOpener.bell(-1);
        toCreator.bell(-1);
        arena.close();
        LibC.close(fd);
        closeAll(bells);
    }
}
