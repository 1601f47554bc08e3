package io.github.sockmap4j.netty;

import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.testsupport.GlobalSockmapSession;
import java.util.concurrent.TimeUnit;

/** The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}). */
public final class SockmapTestSession extends GlobalSockmapSession {
    public SockmapTestSession() {
        super("netty");
    }

    @Override
    protected void afterClass() {
        SockmapSocketTestPermutation.closeGroups();
    }

    @Override
    protected void beforeClose() {
        SockmapSocketTestPermutation.closeGroups();
        SockmapGrpc.sharedGroup().shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10_000);
    }
}
