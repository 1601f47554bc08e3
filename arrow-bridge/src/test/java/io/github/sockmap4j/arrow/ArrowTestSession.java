package io.github.sockmap4j.arrow;

import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.testsupport.GlobalSockmapSession;

/**
 * The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}):
 * the gRPC event loops are closed first, so nothing opens the global again while it closes.
 */
public final class ArrowTestSession extends GlobalSockmapSession {
    public ArrowTestSession() {
        super("arrow-global");
    }

    @Override
    protected void beforeClose() {
        SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), SockmapGrpc.sharedGroup());
    }
}
