package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.net.UnixListener;

/**
 * One parsed request as a handler gets it: who sent it (the kernel-given credentials recorded
 * when it connected), the connection it came on (the lease of its {@code OPTIN} rules), its line
 * as sent (for the log) and what it asks.
 */
record Request(UnixListener.Credentials who, Owner connection, String line, AgentRequest ask) {
    int uid() {
        return who.uid();
    }
}
