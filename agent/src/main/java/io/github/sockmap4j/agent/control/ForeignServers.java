package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentRequest;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.function.BiFunction;

/**
 * A bound sets how much may be redirected to a server unread: set low, every stream to it goes by
 * TCP. So a user other than root sets a bound (other than the receiver's own, 0) only on a port
 * where a server of its own listens within the rule's network and no other uid's does: not ahead
 * of a server, where it would fall on whoever listens there next. Where a namespace's listeners
 * cannot be read now ({@link Listeners.NotRead}: too many, or reads have used their share of a
 * CPU for longer than what was read may be used), nothing can be said, and the bound is refused.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class ForeignServers {
    /** Who listens on a port, in the namespace of a requester's pid and those the agent watches. */
    private final BiFunction<Integer, Long, List<Listeners.Listener>> listeners;

    ForeignServers(BiFunction<Integer, Long, List<Listeners.Listener>> listeners) {
        this.listeners = listeners;
    }

    /** Null when {@code uid} (process {@code pid}) may ask for {@code req}'s bound, else why not. */
    String refusal(int uid, long pid, AgentRequest req) {
        if (uid == 0 || req.bound() == 0) {
            return null;
        }
        PolicyRule rule = req.rule();
        boolean own = false;
        List<Listeners.Listener> found;
        try {
            found = listeners.apply(rule.port(), pid);
        } catch (Listeners.NotRead e) {
            return e.getMessage();
        }
        for (Listeners.Listener s : found) {
            if (!covers(rule, s.address())) {
                continue;
            }
            if (s.uid() != uid) {
                return "uid " + s.uid() + " listens on " + AgentRequest.show(new InetSocketAddress(s.address(),
                        s.port())) + ": only root, or a rule with bound 0 (the receiver's own), may set the bound of "
                        + "another user's server";
            }
            own = true;
        }
        if (!own) {
            // Set ahead of any server, a bound would fall on whoever listens there next.
            return "no server of uid " + uid + " listens on port " + rule.port() + (rule.network() == null ? ""
                    : " within " + AgentRequest.show(new InetSocketAddress(rule.network(), rule.port()))
                    + "/" + rule.keyBits()) + ": a bound is set on one's own server once it listens (or bound 0, "
                    + "the receiver's own)";
        }
        return null;
    }

    /** Whether a server listening on {@code address} falls under the rule's network (a wildcard one always). */
    static boolean covers(PolicyRule rule, InetAddress address) {
        return address.isAnyLocalAddress() || rule.covers(address);
    }
}
