package io.github.sockmap4j.linux.bpf;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * The in-flight bound's two structs (bpf/src/sockmap4j.h).
 * <pre>
 * struct sm4j_rx {            // sm4j_rx: receiving socket key -> slot
 *     __u32 slot;
 *     __u32 reserved;
 *     __u64 cookie;           // the receiving socket's cookie
 * };
 * struct sm4j_slot {          // sm4j_slots[slot], mmap-ed by receivers
 *     __u64 cookie;           // owner, 0 when free
 *     __u64 read;             // bytes the owner has read
 *     __u32 bound;            // bytes it lets be redirected to it unread
 *     __u32 reserved;
 *     __u64 wake;       slot 0's only: the watchers' wake counter
 * };
 * </pre>
 */
public final class ReadSlotLayout {
    public static final StructLayout RX = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("slot"),
            ValueLayout.JAVA_INT.withName("reserved"),
            ValueLayout.JAVA_LONG.withName("cookie")).withName("sm4j_rx");
    public static final StructLayout SLOT = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("cookie"),
            ValueLayout.JAVA_LONG.withName("read"),
            ValueLayout.JAVA_INT.withName("bound"),
            ValueLayout.JAVA_INT.withName("reserved"),
            ValueLayout.JAVA_LONG.withName("wake")).withName("sm4j_slot");
    public static final long RX_SLOT = RX.byteOffset(MemoryLayout.PathElement.groupElement("slot"));
    public static final long RX_COOKIE = RX.byteOffset(MemoryLayout.PathElement.groupElement("cookie"));
    public static final long SLOT_COOKIE = SLOT.byteOffset(MemoryLayout.PathElement.groupElement("cookie"));
    public static final long SLOT_READ = SLOT.byteOffset(MemoryLayout.PathElement.groupElement("read"));
    public static final long SLOT_BOUND = SLOT.byteOffset(MemoryLayout.PathElement.groupElement("bound"));
    /** Slot 0's {@code wake}: the verdict bumps it when a watcher has something new to look at. */
    public static final long SLOT_WAKE = SLOT.byteOffset(MemoryLayout.PathElement.groupElement("wake"));

    private ReadSlotLayout() {
    }
}
