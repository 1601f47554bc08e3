package io.github.sockmap4j.netty.grpc;

import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallExecutorSupplier;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where a server's calls run when some of its services never block: the builder's executor is
 * gRPC's direct executor, so a call of a non-blocking service runs on the event loop that read it
 * from the first byte to the reply (gRPC looks its method up there too), and this supplier hands
 * every call of any other service to {@code blockingPool} before gRPC calls its handler.
 *
 * <p>Why the supplier names the blocking services' pool and not the other way round: gRPC runs
 * its method look-up on the builder's default executor before it asks the supplier, so a default
 * pool with a direct executor per service would still cross one thread per call.
 *
 * <p>A handler on a loop holds every other connection of that loop while it runs; each callback
 * of a non-blocking service is timed, and one that held its loop longer than {@code stallWarning}
 * logs a WARN naming the service, once per service.
 *
 * <p><b>Note:</b> threadsafe.
 */
final class LoopExecution implements ServerCallExecutorSupplier, ServerInterceptor {
    private static final Logger LOG = LoggerFactory.getLogger(LoopExecution.class);

    private static final Object LOCK = new Object();
    private static ExecutorService shared;

    private final Set<String> onLoops;
    private final Executor blockingPool;
    private final long stallWarningNanos;
    private final Set<String> warned = ConcurrentHashMap.newKeySet();

    LoopExecution(Set<String> onLoops, Executor blockingPool, Duration stallWarning) {
        this.onLoops = Set.copyOf(onLoops);
        this.blockingPool = Objects.requireNonNull(blockingPool, "blockingPool");
        this.stallWarningNanos = stallWarning.toNanos();
        for (String s : this.onLoops) {
            if (s.isBlank() || s.indexOf('/') >= 0) {
                throw new IllegalArgumentException("'" + s + "' is not a gRPC service name: give the full name "
                        + "without a method, as package.Service (ServiceDescriptor.getName())");
            }
        }
    }

    /** The pool of the services that may block, unless a server is given its own: daemon threads, made as needed. */
    static Executor sharedBlockingPool() {
        synchronized (LOCK) {
            if (shared == null) {
                shared = Executors.newCachedThreadPool(new DefaultThreadFactory("sockmap4j-handler", true));
            }
            return shared;
        }
    }

    /** The services that have held a loop past the warning, for tests. */
    Set<String> warned() {
        return Set.copyOf(warned);
    }

    boolean runsOnLoop(String service) {
        return onLoops.contains(service);
    }

    @Override
    public <ReqT, RespT> Executor getExecutor(ServerCall<ReqT, RespT> call, Metadata headers) {
        // null: stay on the builder's executor, the direct one.
        return runsOnLoop(call.getMethodDescriptor().getServiceName()) ? null : blockingPool;
    }

    @Override
    public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(ServerCall<ReqT, RespT> call, Metadata headers,
            ServerCallHandler<ReqT, RespT> next) {
        String service = call.getMethodDescriptor().getServiceName();
        if (!runsOnLoop(service) || warned.contains(service)) {
            return next.startCall(call, headers);
        }
        long t0 = System.nanoTime();
        ServerCall.Listener<ReqT> listener = next.startCall(call, headers);
        timed(service, t0);
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<>(listener) {
            @Override
            public void onMessage(ReqT message) {
                long t = System.nanoTime();
                super.onMessage(message);
                timed(service, t);
            }

            @Override
            public void onHalfClose() {
                long t = System.nanoTime();
                super.onHalfClose();
                timed(service, t);
            }

            @Override
            public void onReady() {
                long t = System.nanoTime();
                super.onReady();
                timed(service, t);
            }
        };
    }

    private void timed(String service, long startNanos) {
        long held = System.nanoTime() - startNanos;
        if (held > stallWarningNanos && warned.add(service)) {
            LOG.warn("gRPC service {} runs on the event loops (declared non-blocking) and one of its calls held its "
                    + "loop for {} ms, and every other connection of that loop with it: if its handlers block or "
                    + "compute for long, leave it out of the non-blocking services so that it runs on the pool "
                    + "(logged once per service)", service, held / 1_000_000);
        }
    }
}
