package io.github.sockmap4j.colocated.grpc;

import java.util.concurrent.CompletionStage;

/**
 * An event loop that can read a co-located connection in place of a thread of its own: it waits
 * on the connection's bell (an eventfd) among its other descriptors, and runs the connection's
 * reads as it runs a socket's. A channel whose replies are read on the loop that serves its caller
 * then wakes once for them, as over TCP, instead of waking a reader that hands them to that loop.
 *
 * <p>What a loop moves: only the frames of the connections registered with it, on the thread that
 * already runs that channel's socket; nothing is added to what either end may send. The Netty
 * transport's implementation wraps an epoll event loop ({@code SockmapGrpc}).
 */
public interface ReadLoop {
    /** Whether the calling thread is this loop's. */
    boolean inLoop();

    /**
     * Runs {@code task} on the loop, soon.
     *
     * @throws java.util.concurrent.RejectedExecutionException where the loop has ended
     */
    void execute(Runnable task);

    /** Runs {@code task} on the loop after {@code delayNanos}; nothing where the loop ended first. */
    void schedule(Runnable task, long delayNanos);

    /**
     * Calls {@code readable} on the loop each time the eventfd {@code fd}'s count is raised
     * (edge-triggered: the loop never reads the count), from when the returned stage completes
     * until its {@link Watch} is cancelled; {@code gone} on the loop where the loop ends first.
     * The stage fails where the loop cannot watch {@code fd}; {@code fd} stays the caller's, to
     * close after the watch is cancelled.
     */
    CompletionStage<Watch> watch(int fd, Runnable readable, Runnable gone);

    /** A descriptor watched by a loop. */
    interface Watch {
        /**
         * Stops watching, from any thread: completes once the descriptor is out of the loop's set
         * (or the loop has ended), from when the caller may close it.
         */
        CompletionStage<Void> cancel();
    }

    /**
     * Where an end's TCP connections run: the loop of the one known by the address given (a
     * channel's by its own, local address; a server's by its client's).
     */
    interface Finder {
        /** The loop that runs the connection known by {@code address}, or null where none can read one. */
        ReadLoop readLoopFor(java.net.SocketAddress address);
    }
}
