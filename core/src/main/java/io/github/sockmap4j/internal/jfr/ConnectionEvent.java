package io.github.sockmap4j.internal.jfr;

import io.github.sockmap4j.linux.net.NativeSocket;
import java.io.IOException;
import java.util.function.Predicate;
import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/** A sockmap4j or Netty transport channel connected: whether the kernel accelerates it (JFR: io.github.sockmap4j.Connection). */
@Name("io.github.sockmap4j.Connection")
@Label("sockmap4j Connection")
@Category("sockmap4j")
@Description("A SockmapChannel or a Netty channel of the transport connected or was accepted, and whether its "
        + "sends take the redirect")
@StackTrace(false) // one per connection: the call stack says nothing a service needs
public final class ConnectionEvent extends Event {
    @Label("Local Address")
    public String local;

    @Label("Remote Address")
    public String remote;

    @Label("Accelerated")
    public boolean accelerated;

    @Label("In-Flight Bound")
    @Description("The bound this end sets as a receiver, in bytes; -1 when it sets none")
    public int bound;

    /**
     * Emits the event for the connected {@code socket}, with the bound it sets as a receiver
     * (-1 for none). Costs nothing unless a recording enables the event, and a few system calls
     * when one does.
     *
     * @param accelerated whether a socket sends through the redirect (asked only when a recording
     *                    takes the event); null when the fast path is off
     */
    public static void record(NativeSocket socket, Predicate<NativeSocket> accelerated, int bound) {
        ConnectionEvent event = new ConnectionEvent();
        if (event.shouldCommit()) {
            try {
                event.local = String.valueOf(socket.localAddress());
                event.remote = String.valueOf(socket.remoteAddress());
                event.accelerated = accelerated != null && accelerated.test(socket);
                event.bound = bound;
                event.commit();
            } catch (IOException ignored) {
                // No event for a socket that is already gone.
            }
        }
    }
}
