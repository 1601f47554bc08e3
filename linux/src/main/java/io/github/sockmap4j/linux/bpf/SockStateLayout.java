package io.github.sockmap4j.linux.bpf;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * <pre>
 * struct sm4j_sock_state {   // SK_STORAGE value of a registered socket
 *     __u64 redirected;      // bytes the verdict redirected
 *     __u64 tcp;             // bytes queued to TCP, from write_seq, as of the last verdict
 *     __u32 last_seq;
 *     __u32 flags;           // SM4J_SOCK_TCP = 1: sending by TCP until the peer read all
 *     __u32 policy_bound;    // the bound of the connection's policy entry, 0 for the default
 *     __u32 peer_slot;       // the peer's read slot as the verdict last found it ...
 *     __u64 peer_cookie;     // ... while the slot holds this cookie (0: look it up)
 *     __u64 share_id;        // the share of the SOCKHASH its entry counts in ...
 *     __u32 share_kind;      // ... 0: none
 *     __u32 leg;             // SM4J_LEG_*: the mesh leg its bytes count as, 0 for none
 * };
 * </pre>
 */
public final class SockStateLayout {
    public static final StructLayout LAYOUT = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("redirected"),
            ValueLayout.JAVA_LONG.withName("tcp"),
            ValueLayout.JAVA_INT.withName("last_seq"),
            ValueLayout.JAVA_INT.withName("flags"),
            ValueLayout.JAVA_INT.withName("policy_bound"),
            ValueLayout.JAVA_INT.withName("peer_slot"),
            ValueLayout.JAVA_LONG.withName("peer_cookie"),
            ValueLayout.JAVA_LONG.withName("share_id"),
            ValueLayout.JAVA_INT.withName("share_kind"),
            ValueLayout.JAVA_INT.withName("leg")).withName("sm4j_sock_state");
    public static final long REDIRECTED = LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement("redirected"));
    public static final long TCP_BYTES = LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement("tcp"));
    public static final long FLAGS = LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement("flags"));
    public static final long POLICY_BOUND = LAYOUT.byteOffset(MemoryLayout.PathElement.groupElement("policy_bound"));
    /** SM4J_SOCK_TCP: sending by TCP until the peer has read everything. */
    public static final int TCP = 1;

    private SockStateLayout() {
    }
}
