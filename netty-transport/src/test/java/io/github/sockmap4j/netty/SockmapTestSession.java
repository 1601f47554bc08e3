package io.github.sockmap4j.netty;

import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.testsupport.GlobalSockmapSession;
import io.netty.channel.EventLoopGroup;
import java.util.concurrent.TimeUnit;

/** The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}). */
public final class SockmapTestSession extends GlobalSockmapSession {
    public SockmapTestSession() {
        super("netty");
    }

    @Override
    protected void beforeClose() {
        // Netty's suite leaves channels to its event loops: closing the loops closes them.
        for (EventLoopGroup g : new EventLoopGroup[] {SockmapSocketTestPermutation.EPOLL_BOSS,
            SockmapSocketTestPermutation.EPOLL_WORKER, SockmapSocketTestPermutation.NIO, SockmapGrpc.sharedGroup()}) {
            g.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10_000);
        }
    }
}
