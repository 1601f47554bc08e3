package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Epoll;
import io.github.sockmap4j.linux.ffi.EpollEvent;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.sys.Cgroups;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * The start-up self-test (docs/kernel.md, "Wake-ups and FIONREAD"): one loopback connection
 * through the fast path, checking what kernels have broken before. Both ends must be registered,
 * redirected bytes must arrive whole and in order, counted as redirected, and wake an
 * edge-triggered epoll each time they arrive; any of that missing turns the fast path off. What
 * FIONREAD counts on a registered socket is measured too, for redirected bytes and for TCP bytes
 * (the sender taken out of the map), and reported as {@link Counts} (the public
 * {@code Fionread} names them): the library's channels do not use it, so it decides nothing by
 * itself.
 */
public final class KernelProbe {
    private static final int TIMEOUT_MS = 2000;
    private static final int SIZE = 64;

    /**
     * What the probe found: {@code failure} is null when the fast path works; {@code counts} is
     * null when it did not run.
     */
    public record Result(String failure, Counts counts) {
        static Result failed(String why) {
            return new Result(why, null);
        }
    }

    /** What FIONREAD counted on a registered socket: redirected bytes, TCP bytes. */
    public record Counts(boolean redirected, boolean tcp) {
    }

    private KernelProbe() {
    }

    /**
     * {@link #run} when this process is in the attached cgroup (elsewhere its own connections are
     * not registered, so there is nothing to probe).
     */
    public static Result runIfInside(KernelSockmap kernel) {
        try {
            java.util.Optional<java.nio.file.Path> own = Cgroups.ownCgroupDir();
            if (own.isEmpty() || !own.get().startsWith(kernel.cgroupDir())) {
                org.slf4j.LoggerFactory.getLogger(KernelProbe.class)
                        .debug("Start-up probe skipped: this process is not in {}", kernel.cgroupDir());
                return new Result(null, null);
            }
        } catch (IOException e) {
            return Result.failed(e.getMessage());
        }
        Result r = run(kernel);
        if (r.failure() == null) {
            log(r.counts());
        }
        return r;
    }

    /** What a user of {@code available()} should know about this kernel, at start. */
    private static void log(Counts c) {
        // The channel's class names the line, as for the fast path's other start-up lines.
        org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger("io.github.sockmap4j.Sockmap");
        if (c.tcp() && !c.redirected()) {
            log.debug("This kernel's FIONREAD does not count redirected bytes: "
                    + "InputStream.available() of a java.net.Socket on an opted-in port says 0 while redirected "
                    + "data waits (reads return it; sockmap4j's channels and its Netty transport do not use FIONREAD)");
        } else if (!c.tcp()) {
            // A fact about the kernel that sockmap4j's channels and Netty transport handle (they do not
            // use FIONREAD): nothing for most users to do, so DEBUG; docs/kernel.md says it for users of available().
            log.debug("This kernel's FIONREAD says 0 for TCP bytes queued to a "
                    + "registered socket: InputStream.available() of a java.net.Socket on an opted-in port, and any "
                    + "FIONREAD user, sees 0 while TCP data waits (reads return it; sockmap4j's channels and its "
                    + "Netty transport do not use FIONREAD)");
        }
    }

    /** Runs the probe. */
    public static Result run(KernelSockmap kernel) {
        NativeSocket server = null;
        NativeSocket client = null;
        NativeSocket accepted = null;
        int epfd = -1;
        PolicyRule rule = null;
        try (Arena arena = Arena.ofConfined()) {
            InetAddress lo = InetAddress.getByName("127.0.0.1");
            server = NativeSocket.newStream();
            server.bind(new InetSocketAddress(lo, 0));
            server.listen(4);
            int port = server.localAddress().getPort();
            rule = kernel.optIn(PolicyRule.anyAddress(port));

            client = NativeSocket.newStream();
            int r = client.connectNow(new InetSocketAddress(lo, port), false);
            if (r < 0 && -r != Errno.EINPROGRESS) {
                throw Errno.error("connect", r);
            }
            if (!client.await(Linux.POLLOUT, TIMEOUT_MS)) {
                return Result.failed("probe: loopback connect timed out");
            }
            if (!server.await(Linux.POLLIN, TIMEOUT_MS)) {
                return Result.failed("probe: loopback accept timed out");
            }
            accepted = server.acceptNow();
            if (accepted == null) {
                return Result.failed("probe: the loopback connection was not there to accept");
            }
            long netns = client.netnsCookie();
            InetSocketAddress cl = client.localAddress();
            if (kernel.lookupSocket(lo, cl.getPort(), lo, port, netns) != client.cookie()
                    || kernel.lookupSocket(lo, port, lo, cl.getPort(), netns) != accepted.cookie()) {
                return Result.failed("probe: the sockops program did not register a loopback connection "
                        + "(is this process in cgroup " + kernel.cgroupDir() + "?)");
            }
            epfd = Epoll.epollCreate();
            int c = Epoll.tryEpollCtl(epfd, Linux.EPOLL_CTL_ADD, accepted.intValue(), Linux.EPOLLIN | Linux.EPOLLET);
            if (c < 0) {
                throw Errno.error("epoll_ctl", c);
            }
            Probe p = new Probe(arena, client, accepted, epfd);

            // Redirected bytes, twice: the second edge comes after the first was read.
            long before = kernel.counters()[Counter.MSGS_REDIRECTED.ordinal()];
            String failed = p.sendAndWake((byte) 0x5a, "redirected");
            if (failed != null) {
                return Result.failed(failed);
            }
            if (kernel.counters()[Counter.MSGS_REDIRECTED.ordinal()] == before) {
                return Result.failed("probe: the sk_msg program did not redirect a message between two registered "
                        + "sockets");
            }
            int redirectedCount = accepted.fionread();
            if ((failed = p.receive((byte) 0x5a, "redirected")) != null
                    || (failed = p.sendAndWake((byte) 0x5b, "redirected, the second message,")) != null
                    || (failed = p.receive((byte) 0x5b, "redirected")) != null) {
                return Result.failed(failed);
            }

            // TCP bytes into the registered receiver: the sender leaves the map, so its sends skip
            // the verdict.
            if (!kernel.removeSocket(lo, cl.getPort(), lo, port, netns)) {
                return Result.failed("probe: could not take the probe's client out of the socket map");
            }
            if ((failed = p.sendAndWake((byte) 0x5c, "TCP")) != null) {
                return Result.failed(failed);
            }
            int tcpCount = accepted.fionread();
            if ((failed = p.receive((byte) 0x5c, "TCP")) != null) {
                return Result.failed(failed);
            }
            return new Result(null, classify(redirectedCount, tcpCount));
        } catch (IOException e) {
            return Result.failed("probe failed: " + e.getMessage());
        } finally {
            LibC.close(epfd);
            for (NativeSocket s : new NativeSocket[] {accepted, client, server}) {
                if (s != null) {
                    s.closeNow();
                }
            }
            if (rule != null) {
                kernel.optOut(rule);
            }
        }
    }

    /** What FIONREAD said with {@code SIZE} redirected, then {@code SIZE} TCP bytes queued. */
    static Counts classify(int redirectedCount, int tcpCount) {
        return new Counts(redirectedCount == SIZE, tcpCount == SIZE);
    }

    /** One probe connection: a client sending {@code SIZE} bytes at a time, an accepted socket under an edge-triggered epoll. */
    private record Probe(Arena arena, NativeSocket client, NativeSocket accepted, int epfd) {
        /** Sends one message of {@code fill} bytes; null when the receiver's epoll woke for it. */
        String sendAndWake(byte fill, String what) throws IOException {
            MemorySegment msg = arena.allocate(SIZE);
            msg.fill(fill);
            long sent = client.send(msg, 0);
            if (sent != SIZE) {
                return "probe: send returned " + sent;
            }
            MemorySegment events = arena.allocate(EpollEvent.SIZE * 4, 4);
            int n = Epoll.tryEpollWait(epfd, events, TIMEOUT_MS);
            if (n <= 0 || (EpollEvent.events(events, 0) & Linux.EPOLLIN) == 0) {
                return "probe: this kernel (" + System.getProperty("os.version") + ") did not wake an "
                        + "edge-triggered epoll within " + TIMEOUT_MS + " ms for " + what + " bytes queued to a "
                        + "registered socket: readers like Netty's would stall (docs/kernel.md, 'Wake-ups and "
                        + "FIONREAD')";
            }
            return null;
        }

        /** Reads back the message of {@code fill} bytes; null when it arrived whole. */
        String receive(byte fill, String what) throws IOException {
            MemorySegment in = arena.allocate(2 * SIZE);
            long got = accepted.recv(in, 0);
            MemorySegment expected = arena.allocate(SIZE);
            expected.fill(fill);
            if (got != SIZE || in.asSlice(0, SIZE).mismatch(expected) != -1) {
                return "probe: this kernel (" + System.getProperty("os.version") + ") returned " + got + " bytes "
                        + (got == SIZE ? "that differ from" : "instead of") + " the " + SIZE + " " + what
                        + " bytes sent to a registered socket";
            }
            return null;
        }
    }
}
