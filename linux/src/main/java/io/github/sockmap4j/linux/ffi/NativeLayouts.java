package io.github.sockmap4j.linux.ffi;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;

/**
 * The native structs this library reads or writes that are not its own: the kernel's user-space
 * structs, with names as in the kernel's BTF ({@code /sys/kernel/btf/vmlinux}), which the layout
 * test checks them against, and libbpf's {@code bpf_link_create_opts}, which it checks against
 * libbpf's header. Where only
 * a prefix is read ({@code bpf_map_info}, {@code bpf_prog_info}: they only grow at their end), the
 * layout stops after the last field read. {@code epoll_event} differs by architecture: see
 * {@link Platform}.
 */
public final class NativeLayouts {
    /** struct bpf_map_info, up to map_flags. */
    public static final StructLayout BPF_MAP_INFO = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("type"),
            ValueLayout.JAVA_INT.withName("id"),
            ValueLayout.JAVA_INT.withName("key_size"),
            ValueLayout.JAVA_INT.withName("value_size"),
            ValueLayout.JAVA_INT.withName("max_entries"),
            ValueLayout.JAVA_INT.withName("map_flags")).withName("bpf_map_info");

    /** struct bpf_prog_info, up to run_cnt (run statistics were added at 192). */
    public static final StructLayout BPF_PROG_INFO = MemoryLayout.structLayout(
            MemoryLayout.paddingLayout(192),
            ValueLayout.JAVA_LONG.withName("run_time_ns"),
            ValueLayout.JAVA_LONG.withName("run_cnt")).withName("bpf_prog_info");

    /** struct user_msghdr (the kernel's name for the msghdr of sendmsg). */
    public static final StructLayout MSGHDR = MemoryLayout.structLayout(
            ValueLayout.ADDRESS.withName("msg_name"),
            ValueLayout.JAVA_INT.withName("msg_namelen"),
            MemoryLayout.paddingLayout(4),
            ValueLayout.ADDRESS.withName("msg_iov"),
            ValueLayout.JAVA_LONG.withName("msg_iovlen"),
            ValueLayout.ADDRESS.withName("msg_control"),
            ValueLayout.JAVA_LONG.withName("msg_controllen"),
            ValueLayout.JAVA_INT.withName("msg_flags"),
            MemoryLayout.paddingLayout(4)).withName("user_msghdr");

    public static final StructLayout IOVEC = MemoryLayout.structLayout(
            ValueLayout.ADDRESS.withName("iov_base"),
            ValueLayout.JAVA_LONG.withName("iov_len")).withName("iovec");

    public static final StructLayout POLLFD = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("fd"),
            ValueLayout.JAVA_SHORT.withName("events"),
            ValueLayout.JAVA_SHORT.withName("revents")).withName("pollfd");

    /** struct sockaddr_un: a Unix socket's path (NUL-terminated, at most 107 bytes). */
    public static final StructLayout SOCKADDR_UN = MemoryLayout.structLayout(
            ValueLayout.JAVA_SHORT.withName("sun_family"),
            MemoryLayout.sequenceLayout(108, ValueLayout.JAVA_BYTE).withName("sun_path")).withName("sockaddr_un");
    public static final long SUN_PATH = SOCKADDR_UN.byteOffset(MemoryLayout.PathElement.groupElement("sun_path"));

    /** struct ucred: what SO_PEERCRED gives of a Unix socket's peer. */
    public static final StructLayout UCRED = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("pid"),
            ValueLayout.JAVA_INT.withName("uid"),
            ValueLayout.JAVA_INT.withName("gid")).withName("ucred");
    public static final long UCRED_PID = UCRED.byteOffset(MemoryLayout.PathElement.groupElement("pid"));
    public static final long UCRED_UID = UCRED.byteOffset(MemoryLayout.PathElement.groupElement("uid"));
    public static final long UCRED_GID = UCRED.byteOffset(MemoryLayout.PathElement.groupElement("gid"));

    public static final StructLayout SOCKADDR_IN = MemoryLayout.structLayout(
            ValueLayout.JAVA_SHORT.withName("sin_family"),
            ValueLayout.JAVA_SHORT.withName("sin_port"),                     // big-endian
            MemoryLayout.sequenceLayout(4, ValueLayout.JAVA_BYTE).withName("sin_addr"),
            MemoryLayout.sequenceLayout(8, ValueLayout.JAVA_BYTE).withName("__pad")).withName("sockaddr_in");

    public static final StructLayout SOCKADDR_IN6 = MemoryLayout.structLayout(
            ValueLayout.JAVA_SHORT.withName("sin6_family"),
            ValueLayout.JAVA_SHORT.withName("sin6_port"),                    // big-endian
            ValueLayout.JAVA_INT.withName("sin6_flowinfo"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("sin6_addr"),
            ValueLayout.JAVA_INT.withName("sin6_scope_id")).withName("sockaddr_in6");

    public static final StructLayout NLMSGHDR = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("nlmsg_len"),
            ValueLayout.JAVA_SHORT.withName("nlmsg_type"),
            ValueLayout.JAVA_SHORT.withName("nlmsg_flags"),
            ValueLayout.JAVA_INT.withName("nlmsg_seq"),
            ValueLayout.JAVA_INT.withName("nlmsg_pid")).withName("nlmsghdr");

    /** struct nlattr, the header of each attribute after an inet_diag_msg. */
    public static final StructLayout NLATTR = MemoryLayout.structLayout(
            ValueLayout.JAVA_SHORT.withName("nla_len"),
            ValueLayout.JAVA_SHORT.withName("nla_type")).withName("nlattr");

    public static final StructLayout INET_DIAG_SOCKID = MemoryLayout.structLayout(
            ValueLayout.JAVA_SHORT.withName("idiag_sport"),                  // big-endian
            ValueLayout.JAVA_SHORT.withName("idiag_dport"),                  // big-endian
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("idiag_src"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("idiag_dst"),
            ValueLayout.JAVA_INT.withName("idiag_if"),
            MemoryLayout.sequenceLayout(2, ValueLayout.JAVA_INT).withName("idiag_cookie")).withName("inet_diag_sockid");

    public static final StructLayout INET_DIAG_REQ_V2 = MemoryLayout.structLayout(
            ValueLayout.JAVA_BYTE.withName("sdiag_family"),
            ValueLayout.JAVA_BYTE.withName("sdiag_protocol"),
            ValueLayout.JAVA_BYTE.withName("idiag_ext"),
            ValueLayout.JAVA_BYTE.withName("pad"),
            ValueLayout.JAVA_INT.withName("idiag_states"),
            INET_DIAG_SOCKID.withName("id")).withName("inet_diag_req_v2");

    /** struct inet_diag_msg: only its size is used (the attributes follow it). */
    public static final StructLayout INET_DIAG_MSG = MemoryLayout.structLayout(
            ValueLayout.JAVA_BYTE.withName("idiag_family"),
            ValueLayout.JAVA_BYTE.withName("idiag_state"),
            ValueLayout.JAVA_BYTE.withName("idiag_timer"),
            ValueLayout.JAVA_BYTE.withName("idiag_retrans"),
            INET_DIAG_SOCKID.withName("id"),
            ValueLayout.JAVA_INT.withName("idiag_expires"),
            ValueLayout.JAVA_INT.withName("idiag_rqueue"),
            ValueLayout.JAVA_INT.withName("idiag_wqueue"),
            ValueLayout.JAVA_INT.withName("idiag_uid"),
            ValueLayout.JAVA_INT.withName("idiag_inode")).withName("inet_diag_msg");

    /** struct epoll_event on this platform: packed on x86_64, naturally aligned elsewhere. */
    public static final StructLayout EPOLL_EVENT = epollEvent(Platform.current());

    /** libbpf's struct bpf_link_create_opts, up to flags: libbpf reads only the fields within sz. */
    public static final StructLayout LINK_CREATE_OPTS = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("sz"),
            ValueLayout.JAVA_INT.withName("flags"),
            MemoryLayout.paddingLayout(4)).withName("bpf_link_create_opts");

    /**
     * libbpf's {@code struct bpf_test_run_opts} up to {@code batch_size} (libbpf 1.0 and later):
     * {@code sz} says how much of it this caller knows.
     */
    public static final StructLayout TEST_RUN_OPTS = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("sz"),
            ValueLayout.ADDRESS.withName("data_in"),
            ValueLayout.ADDRESS.withName("data_out"),
            ValueLayout.JAVA_INT.withName("data_size_in"),
            ValueLayout.JAVA_INT.withName("data_size_out"),
            ValueLayout.ADDRESS.withName("ctx_in"),
            ValueLayout.ADDRESS.withName("ctx_out"),
            ValueLayout.JAVA_INT.withName("ctx_size_in"),
            ValueLayout.JAVA_INT.withName("ctx_size_out"),
            ValueLayout.JAVA_INT.withName("retval"),
            ValueLayout.JAVA_INT.withName("repeat"),
            ValueLayout.JAVA_INT.withName("duration"),
            ValueLayout.JAVA_INT.withName("flags"),
            ValueLayout.JAVA_INT.withName("cpu"),
            ValueLayout.JAVA_INT.withName("batch_size")).withName("bpf_test_run_opts");

    public static final long TEST_RUN_SZ = offset(TEST_RUN_OPTS, "sz");
    public static final long TEST_RUN_DATA_IN = offset(TEST_RUN_OPTS, "data_in");
    public static final long TEST_RUN_DATA_OUT = offset(TEST_RUN_OPTS, "data_out");
    public static final long TEST_RUN_DATA_SIZE_IN = offset(TEST_RUN_OPTS, "data_size_in");
    public static final long TEST_RUN_DATA_SIZE_OUT = offset(TEST_RUN_OPTS, "data_size_out");
    public static final long TEST_RUN_RETVAL = offset(TEST_RUN_OPTS, "retval");
    public static final long TEST_RUN_REPEAT = offset(TEST_RUN_OPTS, "repeat");
    public static final long LINK_OPTS_SZ = offset(LINK_CREATE_OPTS, "sz");
    public static final long LINK_OPTS_FLAGS = offset(LINK_CREATE_OPTS, "flags");
    public static final long MAP_INFO_TYPE = offset(BPF_MAP_INFO, "type");
    public static final long MAP_INFO_KEY_SIZE = offset(BPF_MAP_INFO, "key_size");
    public static final long MAP_INFO_VALUE_SIZE = offset(BPF_MAP_INFO, "value_size");
    public static final long MAP_INFO_MAX_ENTRIES = offset(BPF_MAP_INFO, "max_entries");
    public static final long MAP_INFO_FLAGS = offset(BPF_MAP_INFO, "map_flags");
    public static final long PROG_INFO_RUN_TIME_NS = offset(BPF_PROG_INFO, "run_time_ns");
    public static final long PROG_INFO_RUN_CNT = offset(BPF_PROG_INFO, "run_cnt");
    public static final long MSGHDR_IOV = offset(MSGHDR, "msg_iov");
    public static final long MSGHDR_IOVLEN = offset(MSGHDR, "msg_iovlen");
    public static final long MSGHDR_CONTROL = offset(MSGHDR, "msg_control");
    public static final long MSGHDR_CONTROLLEN = offset(MSGHDR, "msg_controllen");
    public static final long IOVEC_BASE = offset(IOVEC, "iov_base");
    public static final long IOVEC_LEN = offset(IOVEC, "iov_len");
    public static final long POLLFD_FD = offset(POLLFD, "fd");
    public static final long POLLFD_EVENTS = offset(POLLFD, "events");
    public static final long POLLFD_REVENTS = offset(POLLFD, "revents");

    public static final long SIN_FAMILY = offset(SOCKADDR_IN, "sin_family");
    public static final long SIN_PORT = offset(SOCKADDR_IN, "sin_port");
    public static final long SIN_ADDR = offset(SOCKADDR_IN, "sin_addr");
    public static final long SIN6_FAMILY = offset(SOCKADDR_IN6, "sin6_family");
    public static final long SIN6_PORT = offset(SOCKADDR_IN6, "sin6_port");
    public static final long SIN6_ADDR = offset(SOCKADDR_IN6, "sin6_addr");
    public static final long SIN6_SCOPE_ID = offset(SOCKADDR_IN6, "sin6_scope_id");
    public static final long NLMSG_LEN = offset(NLMSGHDR, "nlmsg_len");
    public static final long NLMSG_TYPE = offset(NLMSGHDR, "nlmsg_type");
    public static final long NLMSG_FLAGS = offset(NLMSGHDR, "nlmsg_flags");
    public static final long NLMSG_SEQ = offset(NLMSGHDR, "nlmsg_seq");
    public static final long NLA_LEN = offset(NLATTR, "nla_len");
    public static final long NLA_TYPE = offset(NLATTR, "nla_type");
    public static final long REQ_FAMILY = offset(INET_DIAG_REQ_V2, "sdiag_family");
    public static final long REQ_PROTOCOL = offset(INET_DIAG_REQ_V2, "sdiag_protocol");
    public static final long REQ_EXT = offset(INET_DIAG_REQ_V2, "idiag_ext");
    public static final long REQ_STATES = offset(INET_DIAG_REQ_V2, "idiag_states");
    public static final long REQ_ID = offset(INET_DIAG_REQ_V2, "id");
    public static final long ID_SPORT = offset(INET_DIAG_SOCKID, "idiag_sport");
    public static final long ID_DPORT = offset(INET_DIAG_SOCKID, "idiag_dport");
    public static final long ID_SRC = offset(INET_DIAG_SOCKID, "idiag_src");
    public static final long ID_DST = offset(INET_DIAG_SOCKID, "idiag_dst");
    public static final long ID_COOKIE = offset(INET_DIAG_SOCKID, "idiag_cookie");

    private NativeLayouts() {
    }

    /** The epoll_event layout of {@code platform}, from its table. */
    public static StructLayout epollEvent(Platform platform) {
        long gap = platform.epollDataOffset() - 4;
        MemoryLayout data = gap == 0 ? ValueLayout.JAVA_LONG_UNALIGNED.withName("data")
                : ValueLayout.JAVA_LONG.withName("data");
        return gap == 0
                ? MemoryLayout.structLayout(ValueLayout.JAVA_INT.withName("events"), data).withName("epoll_event")
                : MemoryLayout.structLayout(ValueLayout.JAVA_INT.withName("events"), MemoryLayout.paddingLayout(gap),
                        data).withName("epoll_event");
    }

    private static long offset(StructLayout s, String name) {
        return s.byteOffset(MemoryLayout.PathElement.groupElement(name));
    }
}
