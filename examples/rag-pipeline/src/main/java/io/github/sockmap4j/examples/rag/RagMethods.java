package io.github.sockmap4j.examples.rag;

import io.github.sockmap4j.arrow.grpc.ArrowGrpc;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.MethodDescriptor;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;

/**
 * The pipeline's four methods and their messages: a question's text, its embedding and its
 * candidates as Arrow batches ({@link ArrowGrpc}'s marshaller), the context's text; and how a
 * stage serves them (a request that does not parse answered by the stage, naming it).
 */
final class RagMethods {
    /** Where the Arrow messages a stage receives are put (those lent to it are accounted here). */
    private static final BufferAllocator MESSAGES = new RootAllocator();
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = SockmapGrpc.bytesMarshaller();
    /**
     * The stages' Arrow batches: an Arrow IPC stream a message, lent through the connection's heap
     * where a co-located connection lends (by default; {@code -Dsockmap4j.colocated.lendBytes=0}: copied).
     */
    private static final MethodDescriptor.Marshaller<VectorSchemaRoot> ARROW = ArrowGrpc.marshaller(MESSAGES);

    /** A question's text in, its embedding out. */
    static final MethodDescriptor<byte[], VectorSchemaRoot> EMBED = unary("rag.Embedding/Embed", BYTES, ARROW);
    /** An embedding in, the candidates out. */
    static final MethodDescriptor<VectorSchemaRoot, VectorSchemaRoot> SEARCH = unary("rag.Search/Search", ARROW, ARROW);
    /** Candidates in, the context's text out. */
    static final MethodDescriptor<VectorSchemaRoot, byte[]> ASSEMBLE = unary("rag.Context/Assemble", ARROW, BYTES);
    static final MethodDescriptor<byte[], byte[]> ASK = unary("rag.Gateway/Ask", BYTES, BYTES);

    private static <Q, R> MethodDescriptor<Q, R> unary(String name, MethodDescriptor.Marshaller<Q> request,
                                                       MethodDescriptor.Marshaller<R> response) {
        return MethodDescriptor.<Q, R>newBuilder().setType(MethodDescriptor.MethodType.UNARY)
                .setFullMethodName(name).setRequestMarshaller(request).setResponseMarshaller(response).build();
    }

    /** A request as a stage's server read it: its value, or why it is not one (answered INVALID_ARGUMENT, named). */
    record Arrival<T>(T value, String error) {
    }

    /**
     * {@code method} as a stage serves it: a request that does not parse arrives as an {@link
     * Arrival} with the reason, so that the stage answers INVALID_ARGUMENT naming itself (gRPC
     * answers a marshaller's failure UNKNOWN, "Application error processing RPC").
     */
    static <Q, R> MethodDescriptor<Arrival<Q>, R> served(MethodDescriptor<Q, R> method) {
        MethodDescriptor.Marshaller<Q> m = method.getRequestMarshaller();
        return method.toBuilder(new MethodDescriptor.Marshaller<Arrival<Q>>() {
            @Override
            public java.io.InputStream stream(Arrival<Q> value) {
                return m.stream(value.value());
            }

            @Override
            public Arrival<Q> parse(java.io.InputStream stream) {
                try {
                    return new Arrival<>(m.parse(stream), null);
                } catch (RuntimeException e) {
                    return new Arrival<>(null, String.valueOf(e.getMessage()));
                }
            }
        }, method.getResponseMarshaller()).build();
    }

    /** Closes {@code message} where it is an Arrow root (its memory, or what it was lent, goes back). */
    static void release(Object message) {
        if (message instanceof VectorSchemaRoot r) {
            r.close();
        }
    }

    private RagMethods() {
    }
}
