package io.github.sockmap4j.spring;

import io.github.sockmap4j.testsupport.GlobalSockmapSession;

/** The pins and cgroup of this module's run (see {@link GlobalSockmapSession}); the services name the same. */
public final class SpringTestSession extends GlobalSockmapSession {
    public SpringTestSession() {
        super("spring");
    }
}
