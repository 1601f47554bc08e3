package io.github.sockmap4j.internal.bpf;

import io.github.sockmap4j.internal.ffi.EpollEvent;
import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import io.github.sockmap4j.internal.net.Sockets;
import io.github.sockmap4j.internal.sys.Cgroups;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * The start-up self-test (docs/kernel.md, "Wake-ups and FIONREAD"): one loopback connection through the fast
 * path, checking what kernels have broken before. Both ends must be registered, the bytes must
 * be counted as redirected, FIONREAD must report them, and an edge-triggered epoll must wake.
 */
public final class KernelProbe {
    private static final int TIMEOUT_MS = 2000;

    private KernelProbe() {
    }

    /**
     * {@link #run} when this process is in the attached cgroup (elsewhere its own connections are
     * not registered, so there is nothing to probe): null when it passed or was skipped.
     */
    public static String runIfInside(KernelSockmap kernel) {
        try {
            java.util.Optional<java.nio.file.Path> own = Cgroups.ownCgroupDir();
            if (own.isEmpty() || !own.get().startsWith(kernel.cgroupDir())) {
                org.slf4j.LoggerFactory.getLogger(KernelProbe.class)
                        .debug("Start-up probe skipped: this process is not in {}", kernel.cgroupDir());
                return null;
            }
        } catch (IOException e) {
            return e.getMessage();
        }
        return run(kernel);
    }

    /** Runs the probe; returns null when the fast path works, else why it does not. */
    public static String run(KernelSockmap kernel) {
        int server = -1;
        int client = -1;
        int accepted = -1;
        int epfd = -1;
        PolicyRule rule = null;
        try (Arena arena = Arena.ofConfined()) {
            InetAddress lo = InetAddress.getByName("127.0.0.1");
            server = Sockets.newStreamSocket();
            LibC.bind(server, Sockets.encode(arena, new InetSocketAddress(lo, 0)));
            LibC.listen(server, 4);
            int port = Sockets.localAddress(server).getPort();
            rule = kernel.optIn(port, null, 0);

            client = Sockets.newStreamSocket();
            int r = LibC.tryConnect(client, Sockets.encode(arena, new InetSocketAddress(lo, port)));
            if (r < 0 && -r != Errno.EINPROGRESS) {
                throw new NativeIOException("connect", -r);
            }
            if (!Sockets.await(client, LibC.POLLOUT, TIMEOUT_MS)) {
                return "probe: loopback connect timed out";
            }
            if (!Sockets.await(server, LibC.POLLIN, TIMEOUT_MS)) {
                return "probe: loopback accept timed out";
            }
            accepted = LibC.tryAccept(server);
            if (accepted < 0) {
                throw new NativeIOException("accept4", -accepted);
            }
            long netns = Sockets.netnsCookie(client);
            InetSocketAddress cl = Sockets.localAddress(client);
            if (kernel.lookupSocket(lo, cl.getPort(), lo, port, netns) != Sockets.cookie(client)
                    || kernel.lookupSocket(lo, port, lo, cl.getPort(), netns) != Sockets.cookie(accepted)) {
                return "probe: the sockops program did not register a loopback connection "
                        + "(is this process in cgroup " + kernel.cgroupDir() + "?)";
            }

            epfd = LibC.epollCreate();
            int c = LibC.tryEpollCtl(epfd, LibC.EPOLL_CTL_ADD, accepted, LibC.EPOLLIN | LibC.EPOLLET);
            if (c < 0) {
                throw new NativeIOException("epoll_ctl", -c);
            }
            long before = kernel.counters()[Counter.MSGS_REDIRECTED.ordinal()];
            MemorySegment msg = arena.allocate(64);
            msg.fill((byte) 0x5a);
            long sent = LibC.trySend(client, msg, 0);
            if (sent != 64) {
                return "probe: send returned " + sent;
            }
            MemorySegment events = arena.allocate(EpollEvent.SIZE * 4, 4);
            int n = LibC.tryEpollWait(epfd, events, TIMEOUT_MS);
            if (n <= 0 || (EpollEvent.events(events, 0) & LibC.EPOLLIN) == 0) {
                return "probe: no edge-triggered epoll wake-up for redirected data "
                        + "(a kernel bug: 929e30f93125 without its fix 04af4efde58a, see 'Wake-ups and FIONREAD' in "
                        + "sockmap4j's docs/kernel.md; kernel " + System.getProperty("os.version") + ")";
            }
            if (kernel.counters()[Counter.MSGS_REDIRECTED.ordinal()] == before) {
                return "probe: the sk_msg program did not redirect a message between two registered sockets";
            }
            int queued = LibC.fionread(accepted);
            if (queued != 64) {
                return "probe: FIONREAD reports " + queued + " bytes with 64 redirected bytes queued "
                        + "(kernel bug 929e30f93125 without its fix 04af4efde58a, see 'Wake-ups and FIONREAD' in "
                        + "sockmap4j's docs/kernel.md; kernel "
                        + System.getProperty("os.version") + ")";
            }
            MemorySegment in = arena.allocate(128);
            long got = LibC.tryRecv(accepted, in, 0);
            if (got != 64 || in.asSlice(0, 64).mismatch(msg) != -1) {
                return "probe: received " + got + " bytes, not the 64 sent";
            }
            return null;
        } catch (IOException e) {
            return "probe failed: " + e.getMessage();
        } finally {
            LibC.close(epfd);
            LibC.close(accepted);
            LibC.close(client);
            LibC.close(server);
            if (rule != null) {
                kernel.optOut(rule);
            }
        }
    }
}
