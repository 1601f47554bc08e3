package io.github.sockmap4j;

import io.github.sockmap4j.internal.ffi.LibC;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * What a gathering write of a {@link SockmapChannel} needs besides the channel: the rule for
 * which writes gather, and a msghdr with iovecs allocated once per channel and reused (an arena
 * per write would cost an allocation and a free on every send).
 *
 * <p><b>Note:</b> not threadsafe: used under the channel's write lock.
 */
final class Gathering {
    /**
     * The most bytes one gathering sendmsg collects (more when a single buffer is larger): small
     * buffers coalesce into messages of this size, large ones are not glued into messages larger
     * than a receiver's in-flight bound, which would send them all by TCP.
     */
    static final long GATHER_BYTES = 64 * 1024;

    private MemorySegment scratch;

    /** Two or more buffers with bytes, all direct: one sendmsg can take them. */
    static boolean gatherable(ByteBuffer[] srcs, int offset, int length) {
        int withBytes = 0;
        for (int i = offset; i < offset + length; i++) {
            if (srcs[i].hasRemaining()) {
                if (!srcs[i].isDirect()) {
                    return false;
                }
                withBytes++;
            }
        }
        return withBytes > 1;
    }

    static long remaining(ByteBuffer[] srcs, int from, int end) {
        long n = 0;
        for (int i = from; i < end; i++) {
            n += srcs[i].remaining();
        }
        return n;
    }

    /**
     * A zeroed msghdr (no name, no control: only its iovec fields are ever set) followed by room
     * for {@code iovecs} iovecs.
     */
    MemorySegment scratch(int iovecs) {
        long need = LibC.MSGHDR_SIZE + LibC.IOVEC_SIZE * iovecs;
        if (scratch == null || scratch.byteSize() < need) {
            scratch = Arena.ofAuto().allocate(need, 8);
        }
        return scratch;
    }
}
