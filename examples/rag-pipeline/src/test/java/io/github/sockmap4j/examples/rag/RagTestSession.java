package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.testsupport.GlobalSockmapSession;
import java.util.concurrent.TimeUnit;

/** The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}). */
public final class RagTestSession extends GlobalSockmapSession {
    public RagTestSession() {
        super("rag");
    }

    @Override
    protected void beforeClose() {
        RagService.group().shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10_000);
        SockmapGrpc.sharedGroup().shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10_000);
    }
}
