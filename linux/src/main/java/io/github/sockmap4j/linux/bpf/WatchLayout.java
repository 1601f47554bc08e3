package io.github.sockmap4j.linux.bpf;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * The bound for receivers that publish nothing (bpf/src/sockmap4j.h).
 * <pre>
 * struct sm4j_watch {     // sm4j_watch: receiving socket key -> this
 *     __u64 sent;         // written by the sender's verdict
 *     __u64 read;         // written by a watcher: bytes surely read (by the verdict on a drain)
 *     __u32 bound;        // written by a watcher (the verdict sets the first, doubles it on a drain)
 *     __u32 flags;        // SM4J_WATCH_WANTED = 1: poll often; SM4J_WATCH_FIXED = 2: a port's bound;
 *                         // SM4J_WATCH_EXACT = 4: the verdict counts its reads at each send
 * };
 * struct sm4j_config {    // the programs' .rodata (const volatile sm4j_cfg), pinned as "config"
 *     __u32 watch_bound;   // first bound of a receiver that publishes nothing
 *     __u32 watch_ceiling; // the largest a drain doubles it to (tcp_rmem's maximum)
 *     __u32 share_max;     // entries of the SOCKHASH one share may hold (0: no limit)
 *     __u32 pad;
 *     __u64 host_netns;    // the cookie of the loader's network namespace: the host's
 * };
 * </pre>
 */
public final class WatchLayout {
    public static final StructLayout WATCH = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("sent"),
            ValueLayout.JAVA_LONG.withName("read"),
            ValueLayout.JAVA_INT.withName("bound"),
            ValueLayout.JAVA_INT.withName("flags")).withName("sm4j_watch");
    public static final StructLayout CONFIG = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("watch_bound"),
            ValueLayout.JAVA_INT.withName("watch_ceiling"),
            ValueLayout.JAVA_INT.withName("share_max"),
            ValueLayout.JAVA_INT.withName("pad"),
            ValueLayout.JAVA_LONG.withName("host_netns")).withName("sm4j_config");
    public static final long SENT = WATCH.byteOffset(MemoryLayout.PathElement.groupElement("sent"));
    public static final long READ = WATCH.byteOffset(MemoryLayout.PathElement.groupElement("read"));
    public static final long BOUND = WATCH.byteOffset(MemoryLayout.PathElement.groupElement("bound"));
    public static final long FLAGS = WATCH.byteOffset(MemoryLayout.PathElement.groupElement("flags"));
    public static final long CONFIG_WATCH_BOUND = CONFIG.byteOffset(MemoryLayout.PathElement.groupElement("watch_bound"));
    public static final long CONFIG_WATCH_CEILING =
            CONFIG.byteOffset(MemoryLayout.PathElement.groupElement("watch_ceiling"));
    public static final long CONFIG_SHARE_MAX = CONFIG.byteOffset(MemoryLayout.PathElement.groupElement("share_max"));
    public static final long CONFIG_HOST_NETNS = CONFIG.byteOffset(MemoryLayout.PathElement.groupElement("host_netns"));
    /** SM4J_WATCH_WANTED: the sender is held on TCP or near the bound, so poll it often. */
    public static final int WANTED = 1;
    /** SM4J_WATCH_FIXED: the bound is the port's own; the watcher leaves it as it is. */
    public static final int FIXED = 2;
    /**
     * SM4J_WATCH_EXACT: the verdict read the receiver's socket at a send (the kernel lets it) and
     * counts its reads exactly at each send; a watcher's estimate adds nothing until the sender waits.
     */
    public static final int EXACT = 4;

    private WatchLayout() {
    }
}
