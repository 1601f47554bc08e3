package io.github.sockmap4j.internal.bpf;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * <pre>
 * struct sm4j_sock_state {   // SK_STORAGE value, one per registered socket that needed it
 *     __u32 flags;           // SM4J_SOCK_TCP_TAINTED = 1: sends go by TCP for good
 *     __u32 reserved;
 * };
 * </pre>
 */
public final class SockStateLayout {
    public static final StructLayout LAYOUT = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("flags"),
            ValueLayout.JAVA_INT.withName("reserved")).withName("sm4j_sock_state");
    public static final int TCP_TAINTED = 1;

    private SockStateLayout() {
    }
}
