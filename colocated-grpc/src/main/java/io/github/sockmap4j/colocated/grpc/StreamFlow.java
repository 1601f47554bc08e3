package io.github.sockmap4j.colocated.grpc;

import io.grpc.Drainable;
import io.grpc.Status;
import io.grpc.SynchronizationContext;
import io.grpc.internal.StreamListener;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayDeque;

/**
 * What both ends of one stream do alike: messages out in frames within the peer's window
 * (HTTP/2's flow control, per stream: a sender holds what the window does not cover and is not
 * ready meanwhile), messages in until the application asks for them, the window given back as it
 * takes them, and every listener callback in one {@link SynchronizationContext}.
 */
abstract class StreamFlow {
    /** The bytes a sender may have sent and its receiver's application not yet taken, per stream. */
    static final int WINDOW = 1 << 20;

    final int id;
    final ColocatedConnection connection;
    final SynchronizationContext callbacks;
    private final int maxInboundMessage;
    private final Object lock = new Object();
    // outbound
    private final ArrayDeque<Out> outbox = new ArrayDeque<>();
    private long sendWindow = WINDOW;
    /**
     * Whether a thread is writing the outbox now: one at a time, or two (the application's, the
     * reader's as the window opens) would each take a frame and write it in either order.
     */
    private boolean draining;
    /**
     * Whether the listener is owed an onReady: someone was told the stream is not ready ({@link
     * #isReady}), or the window ran out, since it was last told. Readiness also ends for a moment
     * while another thread drains a message just queued, and comes back without a window frame:
     * an application that stops writing on a false isReady is told whichever way it comes back.
     */
    private boolean owesOnReady;
    // inbound
    private final ArrayDeque<Inbound> inbox = new ArrayDeque<>();
    private ByteArrayOutputStream assembling;
    private long inboxBytes;
    private int requested;
    private int unreturned;
    private boolean endAfterInbox;
    private boolean done;

    /**
     * An outbound frame; a message's first frame carries the message's length, which takes window.
     * {@code quiet}: more of its batch follows, which wakes the reader.
     */
    private record Out(int kind, byte[] frame, int messageBytes, Runnable sent, boolean quiet, Runnable dropped) {
        Out(int kind, byte[] frame, int messageBytes, Runnable sent, boolean quiet) {
            this(kind, frame, messageBytes, sent, quiet, null);
        }
    }

    /** A whole message in the inbox: what it counts against the window, its bytes, and what dropping it undelivered does. */
    interface Inbound {
        int length();

        InputStream stream();

        default void drop() {
        }
    }

    StreamFlow(int id, ColocatedConnection connection, int maxInboundMessage) {
        this.id = id;
        this.connection = connection;
        this.maxInboundMessage = maxInboundMessage;
        this.callbacks = new SynchronizationContext((t, e) -> {
            throw new IllegalStateException("a co-located stream's callback failed", e);
        });
    }

    /** The listener's messagesAvailable, onReady; and the end once the inbox is empty. */
    abstract StreamListener listener();

    /** Called in {@link #callbacks} once every message before the end was taken. */
    abstract void deliverEnd();

    // ---- outbound ----

    /**
     * Reads the application's message into an array with {@link Frames#MESSAGE_HEADER} bytes free
     * before it, where a message of one frame gets its header: sized as the stream says it is
     * (protobuf's and a byte array's streams know), copied once, not again into a frame.
     */
    static Framed readFramed(InputStream message) throws IOException {
        try (message) {
            Framed out = new Framed(message.available());
            if (message instanceof Drainable d) {
                d.drainTo(out);
            } else {
                out.readFrom(message);
            }
            return out;
        }
    }

    /** An output stream into an array of the size expected after a frame's header, grown only where more comes. */
    static final class Framed extends java.io.OutputStream {
        private byte[] buf;
        private int count = Frames.MESSAGE_HEADER;

        Framed(int expected) {
            buf = new byte[Frames.MESSAGE_HEADER + Math.max(0, expected)];
        }

        @Override
        public void write(int b) {
            room(1);
            buf[count++] = (byte) b;
        }

        @Override
        public void write(byte[] b, int off, int len) {
            java.util.Objects.checkFromIndexSize(off, len, b.length);
            room(len);
            System.arraycopy(b, off, buf, count, len);
            count += len;
        }

        /** Reads {@code in} to its end, straight into the array where it has room. */
        void readFrom(InputStream in) throws IOException {
            while (true) {
                if (count == buf.length) {
                    int b = in.read();
                    if (b < 0) {
                        return;
                    }
                    write(b);
                }
                int n = in.read(buf, count, buf.length - count);
                if (n < 0) {
                    return;
                }
                count += n;
            }
        }

        private void room(int n) {
            if (buf.length - count < n) {
                buf = java.util.Arrays.copyOf(buf, Math.max(count + n, Math.max(32, buf.length * 2)));
            }
        }

        /** The message's length. */
        int length() {
            return count - Frames.MESSAGE_HEADER;
        }

        /** The array, the message from {@link Frames#MESSAGE_HEADER}; it may be longer than they are. */
        byte[] array() {
            return buf;
        }

        /** The array, the message from {@link Frames#MESSAGE_HEADER}, exactly as long as they are. */
        byte[] frame() {
            return count == buf.length ? buf : java.util.Arrays.copyOf(buf, count);
        }
    }

    private int outboundSeq;

    /**
     * The application's message: read, counted for the stream's tracers, queued or sent in frames;
     * false where reading it failed (the caller cancels the stream).
     */
    final boolean writeMessage(InputStream message, io.grpc.internal.StatsTraceContext stats) {
        Lending lending = connection.lending();
        if (lending != null && message instanceof LendableMessage l) {
            try {
                if (l.bodyBytes() >= LendableMessage.LEND_MIN && lend(lending, l, stats)) {
                    message.close();
                    return true;
                }
            } catch (IOException | RuntimeException e) {
                try {
                    message.close(); // what it holds goes (an Arrow batch's buffers)
                } catch (IOException | RuntimeException ignored) {
                    // failing already
                }
                return false;
            }
        }
        Framed m;
        try {
            m = readFramed(message);
        } catch (IOException e) {
            return false;
        }
        stats.outboundMessage(outboundSeq);
        stats.outboundMessageSent(outboundSeq, m.length(), m.length());
        outboundSeq++;
        sendMessage(m);
        return true;
    }

    /**
     * Lends {@code l}'s body from this end's half of the heap and queues its LENT frame; false
     * where the half has no room now, or the frame would not fit the ring (it then goes as bytes).
     */
    private boolean lend(Lending lending, LendableMessage l, io.grpc.internal.StatsTraceContext stats) throws IOException {
        byte[] head = l.head();
        byte[] tail = l.tail();
        int inline = head.length + tail.length;
        if (inline > connection.maxFrame() - 32) {
            return false;
        }
        long bytes = l.bodyBytes();
        long at = lending.place(l);
        if (at < 0) {
            return false;
        }
        byte[] frame = new Frames.Writer(id).putLong(at).putLong(bytes).putInt(head.length)
                .putBytes(head, 0, head.length).putBytes(tail, 0, tail.length).bytes();
        long whole = inline + bytes;
        stats.outboundMessage(outboundSeq);
        stats.outboundMessageSent(outboundSeq, whole, whole);
        outboundSeq++;
        Runnable unsent = () -> lending.unsent(at, bytes);
        synchronized (lock) {
            if (done) {
                unsent.run();
                return true; // the stream ended: as a message written to a finished stream, nothing goes
            }
            outbox.add(new Out(Frames.LENT, frame, inline + LentIn.DESCRIPTOR_BYTES, null, true, unsent));
        }
        drainOutbox();
        return true;
    }

    /**
     * Queues or sends one message in frames; false once the stream is done. A message of one
     * frame is sent in the array it was read into.
     */
    private boolean sendMessage(Framed m) {
        int length = m.length();
        int max = connection.maxFrame() - Frames.MESSAGE_HEADER;
        synchronized (lock) {
            if (done) {
                return false;
            }
            // quiet: gRPC follows a message with a flush, a half-close or trailers, which wake the reader
            if (length <= max) {
                outbox.add(new Out(Frames.MESSAGE, Frames.messageHeader(m.frame(), id, false), length, null, true));
            } else {
                int off = 0;
                boolean first = true;
                do {
                    int n = Math.min(max, length - off);
                    boolean more = off + n < length;
                    byte[] f = Frames.message(id, more, m.array(), Frames.MESSAGE_HEADER + off, n);
                    outbox.add(new Out(Frames.MESSAGE, f, first ? length : 0, null, true));
                    first = false;
                    off += n;
                } while (off < length);
            }
        }
        drainOutbox();
        return true;
    }

    /**
     * Queues a frame behind this stream's messages (half-close, trailers); {@code sent} (may be
     * null) runs once it is written.
     */
    final void sendAfterMessages(int kind, byte[] frame, Runnable sent) {
        synchronized (lock) {
            if (done) {
                return;
            }
            outbox.add(new Out(kind, frame, 0, sent, false));
        }
        drainOutbox();
    }

    /**
     * Sends what the window allows, in order, on one thread at a time (one that finds another
     * draining leaves its frames to it); whether it wrote a frame without waking the peer. Where
     * the window stops it after such a frame, it ends the batch there (publishes and wakes): the
     * peer has to take what was sent before it gives the window back.
     */
    private boolean drainOutbox() {
        synchronized (lock) {
            if (draining) {
                return false; // the thread that drains takes what this one queued, or the window it opened
            }
            draining = true;
        }
        boolean quiet = false;
        boolean stopped = false;
        try {
            while (true) {
                Out next;
                boolean tellReady = false;
                synchronized (lock) {
                    next = outbox.peek();
                    stopped = next == null || next.messageBytes() > 0 && sendWindow <= 0;
                    if (stopped) {
                        draining = false; // decided under the lock: whoever queues or opens the window after drains
                        // this thread may have sent what another queued, and told not ready meanwhile
                        tellReady = owesOnReady && readyLocked();
                        if (tellReady) {
                            owesOnReady = false;
                        }
                    } else {
                        outbox.poll();
                        sendWindow -= next.messageBytes();
                        if (sendWindow <= 0) {
                            owesOnReady = true;
                        }
                    }
                }
                if (stopped) {
                    if (next != null && quiet) {
                        connection.flush(); // the window stopped a batch
                    }
                    if (tellReady) {
                        callbacks.execute(() -> listener().onReady());
                    }
                    return quiet;
                }
                if (!(next.quiet() ? connection.writeQuiet(next.kind(), next.frame())
                        : connection.write(next.kind(), next.frame()))) {
                    return quiet;
                }
                quiet = next.quiet();
                if (next.sent() != null) {
                    next.sent().run();
                }
            }
        } finally {
            if (!stopped) {
                synchronized (lock) {
                    draining = false; // the connection closed, or a write failed
                }
            }
        }
    }

    /** A WINDOW frame: the peer's application took {@code bytes}. */
    final void windowOpened(int bytes) throws Frames.ProtocolException {
        if (bytes <= 0) {
            throw new Frames.ProtocolException("a window of " + bytes + " bytes on stream " + id);
        }
        synchronized (lock) {
            sendWindow += bytes;
            if (sendWindow > WINDOW) {
                throw new Frames.ProtocolException("stream " + id + "'s window given back past what was sent");
            }
        }
        if (drainOutbox()) {
            // messages that waited for this window: the flush gRPC asked for when it sent them went
            // before them, so their batch ends here
            connection.flush();
        }
        notifyIfReady();
    }

    /** Tells the listener onReady where it is owed one and the stream is ready now. */
    private void notifyIfReady() {
        synchronized (lock) {
            if (!owesOnReady || !readyLocked()) {
                return;
            }
            owesOnReady = false;
        }
        callbacks.execute(() -> listener().onReady());
    }

    /** The stream can take messages now: tells the listener once, as a transport does when a stream is made. */
    final void readyOnStart() {
        synchronized (lock) {
            if (!readyLocked()) {
                owesOnReady = true;
                return;
            }
            owesOnReady = false;
        }
        callbacks.execute(() -> listener().onReady());
    }

    private boolean readyLocked() {
        return !done && sendWindow > 0 && outbox.isEmpty();
    }

    final boolean isReady() {
        synchronized (lock) {
            boolean ready = readyLocked();
            if (!ready) {
                owesOnReady = true;
            }
            return ready;
        }
    }

    // ---- inbound ----

    /** A MESSAGE frame's payload; a whole message goes to the inbox. */
    final void messageFrame(boolean more, Frames.Slice bytes) throws Frames.ProtocolException {
        synchronized (lock) {
            if (done) {
                return;
            }
            if (assembling == null && !more) {
                // the whole message in one frame (most are): taken where the reader copied it, no reassembly
                if (bytes.length() > maxInboundMessage) {
                    throw new Frames.ProtocolException("a message on stream " + id + " larger than " + maxInboundMessage
                            + " bytes");
                }
                if (inboxBytes + unreturned + bytes.length() > WINDOW + (long) maxInboundMessage) {
                    throw new Frames.ProtocolException("stream " + id + " sent past its window");
                }
                inbox.add(bytes);
                inboxBytes += bytes.length();
            } else {
                if (!assemble(more, bytes)) {
                    return;
                }
            }
        }
        deliver();
    }

    /** A LENT frame: a whole message whose body the peer lent. */
    final void lentFrame(LentIn m) throws Frames.ProtocolException {
        synchronized (lock) {
            if (!done) {
                if (assembling != null) {
                    throw new Frames.ProtocolException("a lent message on stream " + id + " inside a message in frames");
                }
                if (m.messageBytes() > maxInboundMessage) {
                    throw new Frames.ProtocolException("a message on stream " + id + " larger than " + maxInboundMessage
                            + " bytes");
                }
                if (inboxBytes + unreturned + m.length() > WINDOW + (long) maxInboundMessage) {
                    throw new Frames.ProtocolException("stream " + id + " sent past its window");
                }
                inbox.add(m);
                inboxBytes += m.length();
                m = null;
            }
        }
        if (m != null) {
            m.drop();
            return;
        }
        deliver();
    }

    /** Under the lock: one frame of a message in several; true once the message is whole (in the inbox). */
    private boolean assemble(boolean more, Frames.Slice bytes) throws Frames.ProtocolException {
        if (assembling == null) {
            assembling = new ByteArrayOutputStream(bytes.length());
        }
        if ((long) assembling.size() + bytes.length() > maxInboundMessage) {
            throw new Frames.ProtocolException("a message on stream " + id + " larger than " + maxInboundMessage
                    + " bytes");
        }
        assembling.write(bytes.array(), bytes.offset(), bytes.length());
        if (inboxBytes + unreturned + assembling.size() > WINDOW + (long) maxInboundMessage) {
            throw new Frames.ProtocolException("stream " + id + " sent past its window");
        }
        if (more) {
            return false;
        }
        byte[] m = assembling.toByteArray();
        assembling = null;
        inbox.add(new Frames.Slice(m, 0, m.length));
        inboxBytes += m.length;
        return true;
    }

    /** The application asks for {@code n} more messages. */
    final void request(int n) {
        synchronized (lock) {
            if (done) {
                return;
            }
            requested = (int) Math.min(Integer.MAX_VALUE, (long) requested + n);
        }
        deliver();
    }

    /** The peer's end (half-close, trailers): delivered once the inbox is taken. */
    final void endAfterInbox() {
        synchronized (lock) {
            endAfterInbox = true;
        }
        deliver();
    }

    private void deliver() {
        int giveBack = 0;
        synchronized (lock) {
            while (requested > 0 && !inbox.isEmpty() && !done) {
                Inbound m = inbox.poll();
                inboxBytes -= m.length();
                requested--;
                unreturned += m.length();
                InputStream s = m.stream();
                callbacks.executeLater(() -> listener().messagesAvailable(new SingleMessage(s)));
            }
            if (unreturned >= WINDOW / 4) {
                giveBack = unreturned;
                unreturned = 0;
            }
            if (endAfterInbox && inbox.isEmpty() && !done) {
                endAfterInbox = false;
                callbacks.executeLater(this::deliverEnd);
            }
        }
        if (giveBack > 0) {
            connection.write(Frames.WINDOW, new Frames.Writer(id).putInt(giveBack).bytes());
        }
        callbacks.drain();
    }

    /** Ends the stream here: nothing more is sent or delivered. True the first time. */
    final boolean finish() {
        java.util.List<Runnable> drops = new java.util.ArrayList<>();
        synchronized (lock) {
            if (done) {
                return false;
            }
            done = true;
            for (Out o : outbox) {
                if (o.dropped() != null) {
                    drops.add(o.dropped());
                }
            }
            for (Inbound m : inbox) {
                drops.add(m::drop);
            }
            outbox.clear();
            inbox.clear();
            assembling = null;
        }
        drops.forEach(Runnable::run); // lent bodies back, outside the lock (a give-back writes a frame)
        return true;
    }

    final boolean isDone() {
        synchronized (lock) {
            return done;
        }
    }

    static Status statusOf(int code, String description) {
        Status s = Status.fromCodeValue(code);
        return description == null ? s : s.withDescription(description);
    }

    private static final class SingleMessage implements StreamListener.MessageProducer {
        private InputStream message;

        SingleMessage(InputStream message) {
            this.message = message;
        }

        @Override
        public InputStream next() {
            InputStream m = message;
            message = null;
            return m;
        }
    }
}
