package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Message bodies lent through the connection's heap (no root: a region made here, both ends in
 * this process): they cross by reference and come back, a receiver that reads bytes reads the
 * same bytes, one that keeps bodies makes the sender copy instead of wait, a kept body outlives
 * its connection and no longer, and a peer that names memory outside its half, or gives back what
 * it was not lent, loses its connection.
 */
class LendingTest {
    private static final long CAPACITY = 1 << 20;
    /** Each end's half: four bodies of {@link #BODY}. */
    private static final long HALF = 256 * 1024;
    private static final int BODY = 64 * 1024;

    /** A message of three parts; {@code lent}: whether it arrived lent. */
    record Parts(byte[] head, byte[] body, byte[] tail, boolean lent) {
        byte[] whole() {
            byte[] w = new byte[head.length + body.length + tail.length];
            System.arraycopy(head, 0, w, 0, head.length);
            System.arraycopy(body, 0, w, head.length, body.length);
            System.arraycopy(tail, 0, w, head.length + body.length, tail.length);
            return w;
        }
    }

    private static final class Lendable extends ByteArrayInputStream implements LendableMessage {
        private final Parts parts;

        Lendable(Parts parts) {
            super(parts.whole());
            this.parts = parts;
        }

        @Override
        public byte[] head() {
            return parts.head();
        }

        @Override
        public long bodyBytes() {
            return parts.body().length;
        }

        @Override
        public void writeBody(MemorySegment to) {
            MemorySegment.copy(parts.body(), 0, to, ValueLayout.JAVA_BYTE, 0, parts.body().length);
        }

        @Override
        public byte[] tail() {
            return parts.tail();
        }
    }

    /** Byte arrays sent as bodies that may be lent (all body, no head or tail), read as bytes. */
    static MethodDescriptor.Marshaller<byte[]> lendableBytes() {
        return new MethodDescriptor.Marshaller<>() {
            @Override
            public InputStream stream(byte[] value) {
                return new Lendable(new Parts(new byte[0], value, new byte[0], false));
            }

            @Override
            public byte[] parse(InputStream stream) {
                return ColocatedGrpcTest.BYTES.parse(stream);
            }
        };
    }

    /** Leases a receiving marshaller takes instead of letting the stream's close give bodies back. */
    private final List<LentMessage.Lease> kept = new CopyOnWriteArrayList<>();
    private volatile boolean keep;
    private final AtomicReference<MemorySegment> lastBody = new AtomicReference<>();

    private final MethodDescriptor.Marshaller<Parts> lending = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(Parts value) {
            return new Lendable(value);
        }

        @Override
        public Parts parse(InputStream stream) {
            if (stream instanceof LentMessage l) {
                if (keep) {
                    kept.add(l.keep());
                }
                lastBody.set(l.body());
                return new Parts(l.head(), l.body().toArray(ValueLayout.JAVA_BYTE), l.tail(), true);
            }
            try {
                return new Parts(stream.readAllBytes(), new byte[0], new byte[0], false);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };

    private final MethodDescriptor<Parts, Parts> echo = MethodDescriptor.<Parts, Parts>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("test.Lending/Echo")
            .setRequestMarshaller(lending).setResponseMarshaller(lending).build();
    /** The same method as a server that reads plain bytes sees it. */
    private final MethodDescriptor<byte[], byte[]> echoAsBytes = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("test.Lending/Echo")
            .setRequestMarshaller(ColocatedGrpcTest.BYTES).setResponseMarshaller(ColocatedGrpcTest.BYTES).build();

    private ColocatedServer server;
    private ManagedChannel channel;

    private void start(boolean serverReadsBytes) throws IOException {
        SharedRegion mine = SharedRegion.create("sm4j-lend-test", CAPACITY, 2 * HALF);
        SharedRegion theirs = SharedRegion.open(mine.descriptorForPeer(), CAPACITY, 2 * HALF, mine.bellsForPeer());
        ServerServiceDefinition service = serverReadsBytes
                ? ServerServiceDefinition.builder("test.Lending").addMethod(echoAsBytes,
                        ServerCalls.asyncUnaryCall((byte[] r, io.grpc.stub.StreamObserver<byte[]> o) -> {
                            o.onNext(r);
                            o.onCompleted();
                        })).build()
                : ServerServiceDefinition.builder("test.Lending").addMethod(echo,
                        ServerCalls.asyncUnaryCall((Parts r, io.grpc.stub.StreamObserver<Parts> o) -> {
                            o.onNext(new Parts(r.head(), r.body(), r.tail(), false));
                            o.onCompleted();
                        })).build();
        server = ColocatedServer.builder("lend").addService(service).buildColocated();
        server.server().start();
        server.attach(theirs);
        channel = ColocatedChannelBuilder.forRegion(mine, "lend").build();
    }

    @AfterEach
    void stop() throws InterruptedException {
        kept.forEach(LentMessage.Lease::close);
        if (channel != null) {
            channel.shutdownNow();
            assertTrue(channel.awaitTermination(10, TimeUnit.SECONDS));
        }
        if (server != null) {
            server.server().shutdownNow();
            assertTrue(server.server().awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    private static Parts parts(int seed) {
        Random r = new Random(seed);
        byte[] head = new byte[100 + seed % 50];
        byte[] body = new byte[BODY - seed % 64];
        byte[] tail = new byte[8];
        r.nextBytes(head);
        r.nextBytes(body);
        r.nextBytes(tail);
        return new Parts(head, body, tail, false);
    }

    private Parts call(Parts p) {
        return ClientCalls.blockingUnaryCall(channel, echo, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), p);
    }

    @Test
    void bodiesCrossByReferenceAndComeBack() throws IOException {
        start(false);
        long lentBefore = ColocatedGrpc.messagesLent();
        long noRoomBefore = ColocatedGrpc.lendingNoRoom();
        int calls = 200; // 12.5 MiB of bodies each way through halves of 256 KiB
        for (int i = 0; i < calls; i++) {
            Parts sent = parts(i);
            Parts back = call(sent);
            assertTrue(back.lent(), "call " + i + ": the reply came lent");
            assertArrayEquals(sent.whole(), back.whole(), "call " + i);
        }
        assertEquals(2L * calls, ColocatedGrpc.messagesLent() - lentBefore, "each request and reply lent");
        assertEquals(0, ColocatedGrpc.lendingNoRoom() - noRoomBefore, "every body came back in time for the next");
    }

    @Test
    void aReceiverThatReadsBytesReadsTheSameBytes() throws IOException {
        start(true);
        long lentBefore = ColocatedGrpc.messagesLent();
        for (int i = 0; i < 20; i++) {
            Parts sent = parts(i);
            Parts back = call(sent);
            assertFalse(back.lent(), "the server answered bytes");
            assertArrayEquals(sent.whole(), back.head(), "call " + i);
        }
        assertEquals(20, ColocatedGrpc.messagesLent() - lentBefore, "the requests went lent");
    }

    @Test
    void aReceiverThatKeepsBodiesMakesTheSenderCopyNotWait() throws IOException {
        start(false);
        keep = true; // both ends' marshallers keep what they are lent
        long noRoomBefore = ColocatedGrpc.lendingNoRoom();
        for (int i = 0; i < 12; i++) {
            Parts sent = parts(i);
            assertArrayEquals(sent.whole(), call(sent).whole(), "call " + i);
        }
        assertTrue(ColocatedGrpc.lendingNoRoom() - noRoomBefore > 0, "once the halves were full, bodies went as bytes");
        keep = false;
        kept.forEach(LentMessage.Lease::close);
        kept.clear();
        Parts sent = parts(99);
        call(sent); // carries the give-backs to the server, whose reply carries them to the client
        Parts back = call(sent);
        assertTrue(back.lent(), "given back, the bodies are lent again");
        assertArrayEquals(sent.whole(), back.whole());
    }

    @Test
    void aKeptBodyOutlivesItsConnectionAndNoLonger() throws Exception {
        start(false);
        keep = true;
        Parts sent = parts(7);
        call(sent);
        keep = false;
        MemorySegment body = lastBody.get(); // the reply's body, kept by the client's marshaller
        channel.shutdownNow();
        assertTrue(channel.awaitTermination(10, TimeUnit.SECONDS));
        server.server().shutdownNow();
        assertTrue(server.server().awaitTermination(10, TimeUnit.SECONDS));
        assertArrayEquals(sent.body(), body.toArray(ValueLayout.JAVA_BYTE), "kept, the body is still mapped");
        kept.forEach(LentMessage.Lease::close);
        kept.clear();
        assertThrows(IllegalStateException.class, () -> body.get(ValueLayout.JAVA_BYTE, 0),
                "its last lease closed, the region is unmapped: a read fails, it does not crash");
    }

    /** As a server that writes what it likes: one raw frame, then a call that cannot be answered. */
    private static Status afterRawFrame(int kind, byte[] payload) throws Exception {
        return PeerMisbehavesTest.callAfterGarbage(kind, payload, 2 * HALF);
    }

    @Test
    void aBodyOutsideThePeersHalfEndsTheConnection() throws Exception {
        // the server's half is the heap's second; place 0 of the half from there is fine, but not past its end
        for (long[] bad : new long[][] {{HALF - 64, 128}, {-64, 64}, {0, HALF + 1}, {32, 64}, {0, 0}}) {
            byte[] f = new Frames.Writer(1).putLong(bad[0]).putLong(bad[1]).putInt(0).bytes();
            Status s = afterRawFrame(Frames.LENT, f);
            assertEquals(Status.Code.UNAVAILABLE, s.getCode(), s.toString());
            assertTrue(s.getDescription().contains("outside the peer's half"), s.getDescription());
        }
    }

    @Test
    void givingBackWhatWasNotLentEndsTheConnection() throws Exception {
        byte[] f = new Frames.Writer(0).putLong(0).putLong(BODY).bytes();
        Status s = afterRawFrame(Frames.RETURNED, f);
        assertEquals(Status.Code.UNAVAILABLE, s.getCode(), s.toString());
        assertTrue(s.getDescription().contains("were not lent"), s.getDescription());
    }
}
