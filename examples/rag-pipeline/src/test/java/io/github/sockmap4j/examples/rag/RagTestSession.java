package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.github.sockmap4j.testsupport.GlobalSockmapSession;

/** The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}). */
public final class RagTestSession extends GlobalSockmapSession {
    public RagTestSession() {
        super("rag");
    }

    @Override
    protected void beforeClose() {
        SockmapNetty.shutdown(java.time.Duration.ofSeconds(10), RagService.group(), SockmapGrpc.sharedGroup());
    }
}
