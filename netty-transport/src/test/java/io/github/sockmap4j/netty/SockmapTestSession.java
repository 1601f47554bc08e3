package io.github.sockmap4j.netty;

import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.testsupport.GlobalSockmapSession;

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
        SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), SockmapGrpc.sharedGroup());
    }
}
