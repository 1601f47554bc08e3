package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.control.AgentRequest;
import java.util.Set;

/**
 * What serves some of the control socket's verbs. A verb is served by exactly one handler
 * ({@link Dispatcher} checks it when it starts); a new verb is a new entry in
 * {@link AgentRequest.Verb} (the wire, which clients share) and the handler that serves it.
 */
interface RequestHandler {
    /** The verbs this handler serves. */
    Set<AgentRequest.Verb> verbs();

    /** The reply to {@code request}, one of {@link #verbs()}, sent by a uid within its rate. */
    Reply handle(Request request);
}
