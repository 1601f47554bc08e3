package io.github.sockmap4j.arrow;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.TestKernel;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.concurrent.TimeUnit;
import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;

/**
 * The pins and cgroup of {@link Sockmap#global()} (which the Flight and Netty tests use) for this
 * module's run, removed when the run ends instead of by the JVM's exit hook: the gRPC event
 * loops are closed first, so nothing opens the global again while it closes.
 */
public final class ArrowTestSession implements LauncherSessionListener {
    private static TestKernel kernel;

    public ArrowTestSession() {
        // Made by the JUnit platform through ServiceLoader.
    }

    @Override
    public void launcherSessionOpened(LauncherSession session) {
        try {
            kernel = TestKernel.start("arrow-global");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        System.setProperty("sockmap4j.pinDir", kernel.pinDir.toString());
        System.setProperty("sockmap4j.cgroup", kernel.cgroup.toString());
        Sockmap.global();
    }

    @Override
    public void launcherSessionClosed(LauncherSession session) {
        SockmapGrpc.sharedGroup().shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10_000);
        Sockmap.global().close();
        try {
            kernel.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
