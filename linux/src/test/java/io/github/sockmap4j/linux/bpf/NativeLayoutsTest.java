package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.ffi.EpollEvent;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeLayouts;
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

    /** Every constant of {@link Linux} and {@link Errno}, by its C name: the table is the class. */
    static Map<String, Long> constants() throws IllegalAccessException {
        Map<String, Long> out = new java.util.TreeMap<>();
        for (Class<?> c : List.of(Linux.class, Errno.class)) {
            for (java.lang.reflect.Field f : c.getFields()) {
                if (java.lang.reflect.Modifier.isStatic(f.getModifiers()) && f.getType().isPrimitive()) {
                    out.put(f.getName(), ((Number) f.get(null)).longValue());
                }
            }
        }
        return out;
    }

    @Test
    void everyConstantMatchesTheHeaders() throws Exception {
        Map<String, Long> constants = constants();
        StringBuilder c = new StringBuilder("""
                #define _GNU_SOURCE
                #include <stdio.h>
                #include <stddef.h>
                #include <limits.h>
                #include <fcntl.h>
                #include <sched.h>
                #include <sys/socket.h>
                #include <sys/epoll.h>
                #include <sys/ioctl.h>
                #include <sys/file.h>
                #include <sys/mman.h>
                #include <sys/syscall.h>
                #include <linux/futex.h>
                #include <sys/eventfd.h>
                #include <poll.h>
                #include <errno.h>
                #include <sys/vfs.h>
                #include <netinet/in.h>
                #include <netinet/tcp.h>
                #include <linux/magic.h>
                #include <bpf/bpf.h>
                #define P(x) printf(#x " %lld\\n", (long long) (x));
                int main(void) {
                  P(offsetof(struct bpf_link_create_opts, sz)) P(offsetof(struct bpf_link_create_opts, flags))
                  P(offsetof(struct bpf_test_run_opts, data_in)) P(offsetof(struct bpf_test_run_opts, data_size_in))
                  P(offsetof(struct bpf_test_run_opts, retval)) P(offsetof(struct bpf_test_run_opts, repeat))
                  P(offsetof(struct bpf_test_run_opts, batch_size) + sizeof(__u32))
                  P(sizeof(struct epoll_event)) P(offsetof(struct statfs, f_type))
                  P(sizeof(((struct statfs *) 0)->f_type)) P(sizeof(struct statfs) <= 256)
                  P(SYS_futex)
                """);
        constants.keySet().forEach(name -> c.append("  P(").append(name).append(")\n"));
        c.append("  return 0;\n}\n");
        Map<String, Long> actual = compileAndRun(c.toString());
        assertEquals(NativeLayouts.LINK_OPTS_SZ, actual.get("offsetof(struct bpf_link_create_opts, sz)"));
        assertEquals(NativeLayouts.LINK_OPTS_FLAGS, actual.get("offsetof(struct bpf_link_create_opts, flags)"));
        assertEquals(NativeLayouts.TEST_RUN_DATA_IN, actual.get("offsetof(struct bpf_test_run_opts, data_in)"));
        assertEquals(NativeLayouts.TEST_RUN_DATA_SIZE_IN, actual.get("offsetof(struct bpf_test_run_opts, data_size_in)"));
        assertEquals(NativeLayouts.TEST_RUN_RETVAL, actual.get("offsetof(struct bpf_test_run_opts, retval)"));
        assertEquals(NativeLayouts.TEST_RUN_REPEAT, actual.get("offsetof(struct bpf_test_run_opts, repeat)"));
        assertEquals(NativeLayouts.TEST_RUN_OPTS.byteSize(),
                actual.get("offsetof(struct bpf_test_run_opts, batch_size) + sizeof(__u32)"));
        assertEquals(EpollEvent.SIZE, actual.get("sizeof(struct epoll_event)"));
        assertEquals(0L, actual.get("offsetof(struct statfs, f_type)"));
        assertEquals(8L, actual.get("sizeof(((struct statfs *) 0)->f_type)"));
        assertEquals(1L, actual.get("sizeof(struct statfs) <= 256"));
        assertEquals(io.github.sockmap4j.linux.ffi.Platform.current().sysFutex(), actual.get("SYS_futex"));
        assertTrue(constants.size() > 60, "the table was read: " + constants.size());
        for (var e : constants.entrySet()) {
            long header = actual.get(e.getKey());
            long ours = e.getValue();
            // A C int constant may print as unsigned (EPOLLET is 1u << 31): compare in 32 bits when ours fits.
            boolean same = ours == header || (ours == (int) ours && (int) header == (int) ours);
            assertTrue(same, e.getKey() + ": ours " + ours + ", the header's " + header);
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
