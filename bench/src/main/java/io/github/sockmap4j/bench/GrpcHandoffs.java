package io.github.sockmap4j.bench;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.SockmapNetty;
import io.grpc.CallOptions;
import io.grpc.stub.ClientCalls;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Where a gRPC unary call's time goes between threads: for each transport (and the executor
 * profile, {@code -Dexecutor=direct}), this JVM's threads' voluntary context switches (each one a
 * sleep and a later wake-up), involuntary ones, time on a CPU and time waiting in the run queue,
 * per call, from /proc/self/task/TID/{status,schedstat} read before and after the calls. Threads
 * are grouped by name without their numbers ("grpc-default-executor", "epollEventLoopGroup").
 *
 * <p>With {@code -Dtransports=SOCKMAP} (a comma-separated list) only those run, and "measuring" is
 * printed when the measured calls start, for a tracer to attach then.
 *
 * <p>Each transport is measured after a pass over all of them and then calls until its JIT compilers
 * used at most 2% of a CPU in each of three one-second windows (at most 60 s).
 *
 * <p>Usage: {@code GrpcHandoffs [calls]} (default 20000); loopback, 1 KiB unary calls from this
 * thread (a blocking stub), the server and channel as NettyGrpcBench makes them.
 */
public final class GrpcHandoffs {
    /** {@code -Dseconds=N}: the measured calls go on for at least N seconds (for a tracer's window). */
    private static final long SECONDS = Long.getLong("seconds", 0);
    /** {@code -Dtransports=TCP,SOCKMAP}: only these (all but UDS unless set); {@code -Dpoll=us}: polling loops. */
    private static final java.util.List<String> ONLY = java.util.Arrays.stream(
            System.getProperty("transports", "").split(",")).filter(x -> !x.isBlank()).toList();

    /** {@code -Dsyscalls=false}: no perf stat during the measured calls. */
    private static final boolean SYSCALLS = !"false".equals(System.getProperty("syscalls"));

    private GrpcHandoffs() {
    }

    /** One thread's counters: voluntary and involuntary switches, run and run-queue wait (ns). */
    record Sched(long voluntary, long involuntary, long runNanos, long waitNanos) {
        Sched minus(Sched o) {
            return new Sched(voluntary - o.voluntary, involuntary - o.involuntary, runNanos - o.runNanos,
                    waitNanos - o.waitNanos);
        }

        Sched plus(Sched o) {
            return new Sched(voluntary + o.voluntary, involuntary + o.involuntary, runNanos + o.runNanos,
                    waitNanos + o.waitNanos);
        }
    }

    /** Every thread of this JVM by TID: its name and counters now. */
    static Map<String, Map.Entry<String, Sched>> snapshot() throws IOException {
        Map<String, Map.Entry<String, Sched>> out = new TreeMap<>();
        try (var tasks = Files.list(Path.of("/proc/self/task"))) {
            for (Path task : tasks.toList()) {
                try {
                    String name = Files.readString(task.resolve("comm")).strip();
                    long vol = 0;
                    long invol = 0;
                    for (String l : Files.readAllLines(task.resolve("status"))) {
                        if (l.startsWith("voluntary_ctxt_switches:")) {
                            vol = Long.parseLong(l.substring(l.indexOf(':') + 1).strip());
                        } else if (l.startsWith("nonvoluntary_ctxt_switches:")) {
                            invol = Long.parseLong(l.substring(l.indexOf(':') + 1).strip());
                        }
                    }
                    String[] ss = Files.readString(task.resolve("schedstat")).strip().split(" ");
                    out.put(task.getFileName().toString(), Map.entry(name, new Sched(vol, invol, Long.parseLong(ss[0]),
                            Long.parseLong(ss[1]))));
                } catch (IOException gone) {
                    // The thread ended between the listing and the read.
                }
            }
        }
        return out;
    }

    /** CPU time of this JVM's JIT compiler threads so far. */
    static long jitNanos() throws IOException {
        long sum = 0;
        for (Map.Entry<String, Sched> e : snapshot().values()) {
            if (e.getKey().matches("C[12] CompilerThre.*")) {
                sum += e.getValue().runNanos();
            }
        }
        return sum;
    }

    /** The kernel's thread name (15 characters at most) without its numbers. */
    static String group(String name) {
        return name.replaceAll("[-_]?\\d+", "").replaceAll("[-_]+$", "");
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("GrpcHandoffs [calls]", args);
        int calls = run.intArg(0, 20_000);
        Sockmap sockmap = Sockmap.global();
        if (!sockmap.isActive()) {
            System.err.println("The fast path is off: " + sockmap.unavailabilityCause());
            return;
        }
        long pollMicros = Long.getLong("poll", 0);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(Integer.getInteger("loops", 2), pollMicros > 0
                ? SockmapNetty.ioHandlerFactory(java.time.Duration.ofNanos(pollMicros * 1000))
                : EpollIoHandler.newFactory());
        NettyGrpcBench.pollingExecutors(pollMicros * 1000, true); // -Dexecutor=polling: every transport's, as its loops
        BenchRun.header(String.format(Locale.ROOT, "gRPC unary 1 KiB hand-offs, loopback, executor %s, %d calls, "
                + "event loops polling up to %d us", NettyGrpcBench.DIRECT ? "direct" : NettyGrpcBench.POLLING ? "polling"
                : NettyGrpcBench.LOOPS ? "loops" : "default", calls, pollMicros));
        BenchRun.Table table = new BenchRun.Table(2, "transport", "thread", "sleeps/call", "preempted/call",
                "on CPU us/call", "run-queue us/call");
        BenchRun.Table kernel = new BenchRun.Table(1, "transport", "sk_msg runs/call", "write", "writev", "sendmsg",
                "sendto", "read", "readv", "recvmsg", "recvfrom", "epoll_wait", "futex", "all counted");
        java.io.Closeable runStats = io.github.sockmap4j.admin.SockmapAdmin.enableKernelRunStats();
        Thread.currentThread().setName("caller");
        try (Topology at = Topology.loopback()) {
            byte[] req = new byte[1024];
            for (int pass = 0; pass < 2; pass++) { // pass 0 warms every transport up, pass 1 measures
                for (NettyGrpcBench.Transport t : NettyGrpcBench.Transport.values()) {
                    if (ONLY.isEmpty() ? t == NettyGrpcBench.Transport.UDS : !ONLY.contains(t.name())) {
                        continue;
                    }
                    try (NettyGrpcBench.Grpc g = NettyGrpcBench.grpc(group, at, t)) {
                        if (pass == 0) {
                            for (int i = 0; i < calls; i++) {
                                ClientCalls.blockingUnaryCall(g.channel(), BenchEchoService.UNARY, CallOptions.DEFAULT, req);
                            }
                            continue;
                        }
                        // The other transports' warm-up may have made call sites megamorphic: calls
                        // until the JIT is quiet again, so that its compiling is not charged to this one.
                        long quietSince = System.nanoTime();
                        int quiet = 0;
                        long jitBefore = jitNanos();
                        while (quiet < 3 && System.nanoTime() - quietSince < 60_000_000_000L) {
                            long w0 = System.nanoTime();
                            while (System.nanoTime() - w0 < 1_000_000_000L) {
                                ClientCalls.blockingUnaryCall(g.channel(), BenchEchoService.UNARY, CallOptions.DEFAULT, req);
                            }
                            long jit = jitNanos();
                            quiet = (jit - jitBefore) * 50 <= System.nanoTime() - w0 ? quiet + 1 : 0; // <= 2% of a CPU
                            jitBefore = jit;
                        }
                        System.out.println("measuring " + t + " in pid " + ProcessHandle.current().pid());
                        Map<String, Map.Entry<String, Sched>> before = snapshot();
                        long runsBefore = sockmap.verdictRunCount();
                        SyscallCount syscalls = SYSCALLS ? SyscallCount.start() : null;
                        long t0 = System.nanoTime();
                        int made = 0;
                        for (; made < calls || System.nanoTime() - t0 < SECONDS * 1_000_000_000L; made++) {
                            ClientCalls.blockingUnaryCall(g.channel(), BenchEchoService.UNARY, CallOptions.DEFAULT, req);
                        }
                        long elapsed = System.nanoTime() - t0;
                        int measured = made;
                        Map<String, Long> sys = Map.of();
                        if (syscalls != null) {
                            try (syscalls) {
                                sys = syscalls.stop();
                            }
                        }
                        double perCall = made;
                        Map<String, Long> counted = sys;
                        java.util.function.Function<String, String> per = c -> counted.containsKey(c)
                                ? String.format(Locale.ROOT, "%.2f", counted.get(c) / perCall) : "-";
                        kernel.row(t.name(), String.format(Locale.ROOT, "%.2f", (sockmap.verdictRunCount() - runsBefore)
                                / perCall), per.apply("write"), per.apply("writev"), per.apply("sendmsg"),
                                per.apply("sendto"), per.apply("read"), per.apply("readv"), per.apply("recvmsg"),
                                per.apply("recvfrom"),
                                counted.isEmpty() ? "-" : String.format(Locale.ROOT, "%.2f", (counted.getOrDefault(
                                        "epoll_wait", 0L) + counted.getOrDefault("epoll_pwait", 0L)
                                        + counted.getOrDefault("epoll_pwait2", 0L)) / perCall),
                                per.apply("futex"), counted.isEmpty() ? "-" : String.format(Locale.ROOT, "%.2f",
                                        counted.values().stream().mapToLong(Long::longValue).sum() / perCall));
                        Map<String, Map.Entry<String, Sched>> after = snapshot();
                        Map<String, Sched> byGroup = new TreeMap<>();
                        after.forEach((tid, now) -> {
                            Map.Entry<String, Sched> was = before.get(tid);
                            Sched d = was == null ? now.getValue() : now.getValue().minus(was.getValue());
                            if (d.voluntary() + d.involuntary() > measured / 100) {
                                byGroup.merge(group(now.getKey()), d, Sched::plus);
                            }
                        });
                        double n = measured;
                        byGroup.forEach((name, d) -> table.row(t.name(), name,
                                String.format(Locale.ROOT, "%.2f", d.voluntary() / n),
                                String.format(Locale.ROOT, "%.2f", d.involuntary() / n),
                                BenchRun.fmt(d.runNanos() / 1000.0 / n), BenchRun.fmt(d.waitNanos() / 1000.0 / n)));
                        table.row(t.name(), "(call, wall clock)", "", "", BenchRun.fmt(elapsed / 1000.0 / n), "");
                    }
                }
            }
        } finally {
            SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), group);
            runStats.close();
        }
        table.print();
        System.out.println();
        kernel.print();
        System.out.println("system calls a call by all of this JVM's threads (both ends), counted by perf stat on the "
                + "kernel's sys_enter tracepoints while the measured calls ran (which makes those calls slower: read "
                + "the wall clock above with -Dsyscalls=false); write and read include Netty's eventfd wake-ups; "
                + "epoll_wait counts epoll_wait, epoll_pwait and epoll_pwait2; sk_msg runs: the kernel's runs of the "
                + "verdict program, one per redirected send, both directions");
        System.out.println("sleeps: voluntary context switches (a thread that blocks and is woken later); preempted: "
                + "involuntary ones; threads with fewer than one switch in 100 calls left out");
    }
}
