package io.github.sockmap4j.colocated.grpc;

import io.grpc.CallOptions;

/**
 * Whether a call's caller blocks until it ends: gRPC's blocking stubs say so in the call's options
 * ({@code io.grpc.stub.InternalClientCalls}, in grpc-stub, which every generated stub needs). Where
 * grpc-stub is not there, no call is taken for blocking.
 */
final class BlockingCalls {
    private static final boolean STUBS = stubsPresent();

    private BlockingCalls() {
    }

    private static boolean stubsPresent() {
        try {
            Class.forName("io.grpc.stub.InternalClientCalls", false, BlockingCalls.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    /** Whether {@code options} are a blocking stub's: its thread waits for the call's end from its half-close on. */
    static boolean isBlocking(CallOptions options) {
        return STUBS && Stubs.isBlocking(options);
    }

    /** Loaded only where grpc-stub is. */
    private static final class Stubs {
        private static final CallOptions.Key<?> STUB_TYPE = io.grpc.stub.InternalClientCalls.getStubTypeOption();

        static boolean isBlocking(CallOptions options) {
            // read as the option itself: InternalClientCalls.getStubType fails on a call without one
            return options.getOption(STUB_TYPE) instanceof Enum<?> e && e.name().equals("BLOCKING");
        }
    }
}
