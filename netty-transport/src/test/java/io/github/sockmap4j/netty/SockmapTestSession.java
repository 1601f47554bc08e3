package io.github.sockmap4j.netty;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.TestKernel;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;

/**
 * For the whole test run of this module: a child cgroup this JVM moves into and a pin
 * directory, opened as the pins of {@link Sockmap#global()} (which the transport uses), and
 * all of it removed at the end. With {@code sockmap4j.require=true} a missing fast path fails
 * the run instead of falling back.
 */
public final class SockmapTestSession implements LauncherSessionListener {
    private static TestKernel kernel;

    public SockmapTestSession() {
        // Made by the JUnit platform through ServiceLoader.
    }

    @Override
    public void launcherSessionOpened(LauncherSession session) {
        try {
            kernel = TestKernel.start("netty");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        System.setProperty("sockmap4j.pinDir", kernel.pinDir.toString());
        System.setProperty("sockmap4j.cgroup", kernel.cgroup.toString());
        Sockmap.global();
    }

    @Override
    public void launcherSessionClosed(LauncherSession session) {
        try {
            // Netty's suite leaves channels to its event loops: closing the loops closes them.
            for (io.netty.channel.EventLoopGroup g : new io.netty.channel.EventLoopGroup[] {
                SockmapSocketTestPermutation.EPOLL_BOSS, SockmapSocketTestPermutation.EPOLL_WORKER,
                SockmapSocketTestPermutation.NIO, io.github.sockmap4j.netty.grpc.SockmapGrpc.sharedGroup()}) {
                g.shutdownGracefully(0, 2, java.util.concurrent.TimeUnit.SECONDS).awaitUninterruptibly(10_000);
            }
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(5);
            while (Sockmap.global().stats().socketsInMap() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            Sockmap.global().close();
            kernel.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static TestKernel kernel() {
        return kernel;
    }
}
