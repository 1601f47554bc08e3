package io.github.sockmap4j.linux.bpf;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * The Service translation's structs (bpf/src/sockmap4j.h).
 * <pre>
 * struct sm4j_svc_key {    // VIP as a socket key's address, port host order
 *     __u64 netns;         // a loopback VIP's namespace cookie (one per namespace); 0 for any other
 *     __u32 addr[4]; __u32 port; __u32 pad;
 * };
 * struct sm4j_endpoint { __u32 addr[4]; __u32 port; };
 * struct sm4j_svc {
 *     __u32 count;        // ready endpoints in ep
 *     __u32 local_count;  // of them on this node, first
 *     __u32 flags;        // SM4J_SVC_LOCAL_ONLY
 *     __u32 owner;        // 0: every connect; uid + 1: only that uid's
 *     __u64 netns;        // 0: every namespace; a namespace cookie: only connects made in it
 *     struct sm4j_endpoint ep[SM4J_SVC_ENDPOINTS];
 * };
 * struct sm4j_svc_sock {  // by socket cookie
 *     __u32 addr[4]; __u32 port;        // the Service dialed, which getpeername reports
 *     __u32 ep_port; __u32 ep_addr[4];  // the endpoint the connect went to: the key's peer
 *     __u32 orig_addr[4]; __u32 orig_port; // what the accepting proxy's SO_ORIGINAL_DST is told
 *     __u32 kind;                       // SM4J_ORIG_*: a Service, a mesh's outbound or inbound leg
 * };
 * </pre>
 */
public final class ServiceLayout {
    public static final int ENDPOINTS = 16;
    public static final int LOCAL_ONLY = 1;

    public static final StructLayout KEY = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("netns"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("addr"),
            ValueLayout.JAVA_INT.withName("port"),
            ValueLayout.JAVA_INT.withName("pad")).withName("sm4j_svc_key");
    public static final long KEY_NETNS = KEY.byteOffset(MemoryLayout.PathElement.groupElement("netns"));
    public static final long KEY_ADDR = KEY.byteOffset(MemoryLayout.PathElement.groupElement("addr"));
    public static final StructLayout ENDPOINT = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("addr"),
            ValueLayout.JAVA_INT.withName("port")).withName("sm4j_endpoint");
    public static final StructLayout SERVICE = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("count"),
            ValueLayout.JAVA_INT.withName("local_count"),
            ValueLayout.JAVA_INT.withName("flags"),
            ValueLayout.JAVA_INT.withName("owner"),
            ValueLayout.JAVA_LONG.withName("netns"),
            MemoryLayout.sequenceLayout(ENDPOINTS, ENDPOINT).withName("ep")).withName("sm4j_svc");
    public static final StructLayout SOCK = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("addr"),
            ValueLayout.JAVA_INT.withName("port"),
            ValueLayout.JAVA_INT.withName("ep_port"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("ep_addr"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("orig_addr"),
            ValueLayout.JAVA_INT.withName("orig_port"),
            ValueLayout.JAVA_INT.withName("kind"),
            ValueLayout.JAVA_INT.withName("client_isn"),
            ValueLayout.JAVA_INT.withName("server_isn")).withName("sm4j_svc_sock");
    public static final long SOCK_EP_PORT = SOCK.byteOffset(MemoryLayout.PathElement.groupElement("ep_port"));
    public static final long SOCK_EP_ADDR = SOCK.byteOffset(MemoryLayout.PathElement.groupElement("ep_addr"));

    public static final long COUNT = SERVICE.byteOffset(MemoryLayout.PathElement.groupElement("count"));
    public static final long LOCAL_COUNT = SERVICE.byteOffset(MemoryLayout.PathElement.groupElement("local_count"));
    public static final long FLAGS = SERVICE.byteOffset(MemoryLayout.PathElement.groupElement("flags"));
    public static final long OWNER = SERVICE.byteOffset(MemoryLayout.PathElement.groupElement("owner"));
    public static final long NETNS = SERVICE.byteOffset(MemoryLayout.PathElement.groupElement("netns"));
    public static final long EP = SERVICE.byteOffset(MemoryLayout.PathElement.groupElement("ep"));

    private ServiceLayout() {
    }
}
