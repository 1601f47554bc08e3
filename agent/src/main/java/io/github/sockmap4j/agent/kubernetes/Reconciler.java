package io.github.sockmap4j.agent.kubernetes;

import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.agent.Owner;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The life of one of the agent's Kubernetes reconcilers, written once: its informers started;
 * once their first lists are in, its own catch-up ({@link #listed()}), then the rules of every
 * owner of its kind that the lists no longer have are released (an agent restarted while pods or
 * Services went); {@link #synced()} completes after that. A first list that fails is logged, and
 * the informers retry by themselves. Between the first lists, each event is the subclass's.
 */
abstract class Reconciler implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Reconciler.class);

    protected final NodeAgent agent;
    private final Owner.Kind kind;
    private final CompletableFuture<Void> synced = new CompletableFuture<>();

    Reconciler(NodeAgent agent, Owner.Kind kind) {
        this.agent = agent;
        this.kind = kind;
    }

    /** Called once, from the constructor's end: {@code lists} completes when every first list is in. */
    protected final void whenListed(java.util.concurrent.CompletionStage<?> lists, String what) {
        lists.whenComplete((v, e) -> {
            if (e != null) {
                LOG.warn("Listing {} failed; retrying: {}", what, e.toString());
                return;
            }
            listed();
            // Each owner is looked up as it is let go: an owner added after the snapshot is not in it.
            for (Owner o : agent.owners(kind)) {
                if (!stillListed(o)) {
                    agent.hold(o, List.of());
                    LOG.info("Released the rules of {}: the API server no longer lists it", o);
                }
            }
            synced.complete(null);
        });
    }

    /** Brings the kernel in line with the first lists (their handlers may not have run yet). */
    protected abstract void listed();

    /** Whether {@code owner}, of this reconciler's kind, is in the lists now. */
    protected abstract boolean stillListed(Owner owner);

    /** Whether the first lists have been applied. */
    public final boolean isSynced() {
        return synced.isDone();
    }

    /** Completes once the first lists have been applied. */
    public final CompletableFuture<Void> synced() {
        return synced;
    }

    /** Stops its informers. */
    @Override
    public abstract void close();
}
