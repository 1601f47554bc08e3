package io.github.sockmap4j.internal.ffi;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.sockmap4j.internal.bpf.Btf;
import java.io.IOException;
import java.lang.foreign.StructLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The native structs that are not this project's own against their sources: the kernel's
 * user-space structs against the running kernel's BTF, libbpf's link options and the C
 * library's constants against the installed headers (compiled and run here). Needs no
 * privilege; the host's architecture is the one checked.
 */
class NativeLayoutsTest {
    static final Map<String, StructLayout> KERNEL = Map.ofEntries(
            Map.entry("bpf_map_info", NativeLayouts.BPF_MAP_INFO),
            Map.entry("bpf_prog_info", NativeLayouts.BPF_PROG_INFO),
            Map.entry("user_msghdr", NativeLayouts.MSGHDR),
            Map.entry("iovec", NativeLayouts.IOVEC),
            Map.entry("pollfd", NativeLayouts.POLLFD),
            Map.entry("epoll_event", NativeLayouts.EPOLL_EVENT),
            Map.entry("sockaddr_in", NativeLayouts.SOCKADDR_IN),
            Map.entry("sockaddr_in6", NativeLayouts.SOCKADDR_IN6),
            Map.entry("nlmsghdr", NativeLayouts.NLMSGHDR),
            Map.entry("nlattr", NativeLayouts.NLATTR),
            Map.entry("inet_diag_sockid", NativeLayouts.INET_DIAG_SOCKID),
            Map.entry("inet_diag_req_v2", NativeLayouts.INET_DIAG_REQ_V2),
            Map.entry("inet_diag_msg", NativeLayouts.INET_DIAG_MSG),
            Map.entry("sockaddr_un", NativeLayouts.SOCKADDR_UN),
            Map.entry("ucred", NativeLayouts.UCRED));
    /** Prefixes: the kernel's struct goes on past the last field read. */
    static final List<String> PREFIXES = List.of("bpf_map_info", "bpf_prog_info");

    static Btf kernel;

    @BeforeAll
    static void readKernelBtf() throws Exception {
        kernel = Btf.of(Path.of("/sys/kernel/btf/vmlinux"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"bpf_map_info", "bpf_prog_info", "user_msghdr", "iovec", "pollfd", "epoll_event",
        "sockaddr_in", "sockaddr_in6", "nlmsghdr", "nlattr", "inet_diag_sockid", "inet_diag_req_v2", "inet_diag_msg",
        "sockaddr_un", "ucred"})
    void layoutMatchesTheKernelsBtf(String name) {
        kernel.assertMatches(name, KERNEL.get(name), PREFIXES.contains(name));
    }

    @Test
    void libbpfOptionsAndLibcConstantsMatchTheHeaders() throws Exception {
        String c = """
                #define _GNU_SOURCE
                #include <stdio.h>
                #include <stddef.h>
                #include <fcntl.h>
                #include <sched.h>
                #include <sys/socket.h>
                #include <sys/epoll.h>
                #include <sys/ioctl.h>
                #include <sys/file.h>
                #include <sys/mman.h>
                #include <sys/eventfd.h>
                #include <poll.h>
                #include <errno.h>
                #include <sys/vfs.h>
                #include <netinet/in.h>
                #include <netinet/tcp.h>
                #include <bpf/bpf.h>
                #define P(x) printf(#x " %ld\\n", (long) (x));
                int main(void) {
                  P(offsetof(struct bpf_link_create_opts, sz)) P(offsetof(struct bpf_link_create_opts, flags))
                  P(O_DIRECTORY) P(O_CLOEXEC) P(O_CREAT) P(O_RDWR) P(SOCK_NONBLOCK) P(SOCK_CLOEXEC)
                  P(SOL_SOCKET) P(SO_RCVBUF) P(SO_SNDBUF) P(SO_REUSEADDR) P(SO_REUSEPORT) P(SO_KEEPALIVE)
                  P(SO_LINGER) P(SO_ERROR) P(SO_COOKIE) P(SO_NETNS_COOKIE) P(TCP_NODELAY) P(IPV6_V6ONLY)
                  P(MSG_NOSIGNAL) P(MSG_DONTWAIT) P(FIONREAD) P(FIONBIO) P(EPOLL_CLOEXEC) P(EPOLLRDHUP)
                  P(EFD_NONBLOCK) P(EFD_CLOEXEC) P(LOCK_NB) P(MAP_SHARED) P(sizeof(struct epoll_event))
                  P(AF_UNIX) P(SO_PEERCRED) P(CLONE_NEWNET)
                  P(O_NOFOLLOW) P(O_PATH) P(offsetof(struct statfs, f_type)) P(sizeof(((struct statfs *) 0)->f_type))
                  P(sizeof(struct statfs) <= 256) P(SO_PEERGROUPS) P(ENOTDIR) P(ELOOP) P(EMFILE) P(ENFILE) P(ERANGE)
                  return 0;
                }
                """;
        Map<String, Long> expected = Map.ofEntries(
                Map.entry("offsetof(struct bpf_link_create_opts, sz)", NativeLayouts.LINK_OPTS_SZ),
                Map.entry("offsetof(struct bpf_link_create_opts, flags)", NativeLayouts.LINK_OPTS_FLAGS),
                Map.entry("O_DIRECTORY", (long) LibC.O_DIRECTORY), Map.entry("O_CLOEXEC", (long) LibC.O_CLOEXEC),
                Map.entry("O_CREAT", (long) LibC.O_CREAT), Map.entry("O_RDWR", (long) LibC.O_RDWR),
                Map.entry("SOCK_NONBLOCK", (long) LibC.SOCK_NONBLOCK), Map.entry("SOCK_CLOEXEC", (long) LibC.SOCK_CLOEXEC),
                Map.entry("SOL_SOCKET", (long) LibC.SOL_SOCKET), Map.entry("SO_RCVBUF", (long) LibC.SO_RCVBUF),
                Map.entry("SO_SNDBUF", (long) LibC.SO_SNDBUF), Map.entry("SO_REUSEADDR", (long) LibC.SO_REUSEADDR),
                Map.entry("SO_REUSEPORT", (long) LibC.SO_REUSEPORT), Map.entry("SO_KEEPALIVE", (long) LibC.SO_KEEPALIVE),
                Map.entry("SO_LINGER", (long) LibC.SO_LINGER), Map.entry("SO_ERROR", (long) LibC.SO_ERROR),
                Map.entry("SO_COOKIE", (long) LibC.SO_COOKIE), Map.entry("SO_NETNS_COOKIE", (long) LibC.SO_NETNS_COOKIE),
                Map.entry("TCP_NODELAY", (long) LibC.TCP_NODELAY), Map.entry("IPV6_V6ONLY", (long) LibC.IPV6_V6ONLY),
                Map.entry("MSG_NOSIGNAL", (long) LibC.MSG_NOSIGNAL), Map.entry("MSG_DONTWAIT", (long) LibC.MSG_DONTWAIT),
                Map.entry("FIONREAD", LibC.FIONREAD), Map.entry("FIONBIO", LibC.FIONBIO),
                Map.entry("EPOLL_CLOEXEC", (long) LibC.EPOLL_CLOEXEC), Map.entry("EPOLLRDHUP", (long) LibC.EPOLLRDHUP),
                Map.entry("EFD_NONBLOCK", (long) LibC.EFD_NONBLOCK), Map.entry("EFD_CLOEXEC", (long) LibC.EFD_CLOEXEC),
                Map.entry("LOCK_NB", (long) LibC.LOCK_NB), Map.entry("MAP_SHARED", (long) LibC.MAP_SHARED),
                Map.entry("sizeof(struct epoll_event)", EpollEvent.SIZE),
                Map.entry("AF_UNIX", (long) LibC.AF_UNIX), Map.entry("SO_PEERCRED", (long) LibC.SO_PEERCRED),
                Map.entry("CLONE_NEWNET", (long) LibC.CLONE_NEWNET),
                Map.entry("O_NOFOLLOW", (long) LibC.O_NOFOLLOW), Map.entry("O_PATH", (long) LibC.O_PATH),
                Map.entry("offsetof(struct statfs, f_type)", 0L),
                Map.entry("sizeof(((struct statfs *) 0)->f_type)", 8L),
                Map.entry("sizeof(struct statfs) <= 256", 1L),
                Map.entry("SO_PEERGROUPS", (long) LibC.SO_PEERGROUPS),
                Map.entry("ENOTDIR", (long) Errno.ENOTDIR), Map.entry("ELOOP", (long) Errno.ELOOP),
                Map.entry("EMFILE", (long) Errno.EMFILE), Map.entry("ENFILE", (long) Errno.ENFILE),
                Map.entry("ERANGE", (long) Errno.ERANGE));
        Map<String, Long> actual = compileAndRun(c);
        for (var e : expected.entrySet()) {
            assertEquals(actual.get(e.getKey()), e.getValue(), e.getKey());
        }
    }

    static Map<String, Long> compileAndRun(String source) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("sockmap4j-layout");
        try {
            Path src = dir.resolve("probe.c");
            Path exe = dir.resolve("probe");
            Files.writeString(src, source);
            run(List.of("cc", "-o", exe.toString(), src.toString()));
            Map<String, Long> out = new java.util.HashMap<>();
            for (String line : run(List.of(exe.toString())).split("\n")) {
                int sp = line.lastIndexOf(' ');
                out.put(line.substring(0, sp), Long.parseLong(line.substring(sp + 1)));
            }
            return out;
        } finally {
            try (var files = Files.list(dir)) {
                for (Path p : files.toList()) {
                    Files.delete(p);
                }
            }
            Files.delete(dir);
        }
    }

    private static String run(List<String> cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed: " + out);
        }
        return out;
    }
}
