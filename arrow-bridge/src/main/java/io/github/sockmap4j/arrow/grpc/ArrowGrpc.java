package io.github.sockmap4j.arrow.grpc;

import io.github.sockmap4j.colocated.grpc.LendableMessage;
import io.github.sockmap4j.colocated.grpc.LentMessage;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BoundsChecking;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ForeignAllocation;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.ArrowBuffer;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.ipc.message.MessageMetadataResult;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Arrow record batches as gRPC messages: each message an Arrow IPC stream of one schema and one
 * record batch, which any Arrow reader reads, and which, between two sockmap4j endpoints whose
 * co-located connection lends (by default; {@code -Dsockmap4j.colocated.lendBytes=0} at either
 * end turns it off), crosses by
 * reference: the batch's buffers are copied once into the sender's half of the connection's
 * heap, and the receiver's vectors are those buffers where they are (no IPC body written,
 * copied through a ring, or read into new memory). Over HTTP/2, or where the heap has no room,
 * the same bytes go as bytes.
 *
 * <p>Who may use it: any gRPC client or server; what it moves: the batches of the calls that use
 * it, lent only to the other end of the co-located connection they go over (a process of the same
 * user that proved it holds that TCP connection). A batch received in place is the sender's
 * memory: the sender can change its values while they are read, and the receiver relies on
 * Arrow's bounds checks to keep every read inside the buffer it belongs to ({@link
 * #marshaller} reads bytes instead where they are off).
 *
 * <p>The root a call is given is the receiver's to close: closing it gives the lent buffers back
 * (until then they take room in the sender's heap; a receiver that keeps them makes the sender
 * copy its next batches through the ring, never wait). The root a call sends is read when the
 * call sends it: keep it open until then (gRPC retries, where on, send it again later).
 * Dictionaries are not carried: send decoded vectors.
 */
@SuppressWarnings("restricted") // MemorySegment.reinterpret over ArrowBuf memory (--enable-native-access)
public final class ArrowGrpc {
    private static final IpcOption IPC = IpcOption.DEFAULT;
    /** The end-of-stream marker that follows the batch (the tail of every message). */
    private static final byte[] END_OF_STREAM = endOfStream();

    private ArrowGrpc() {
    }

    /**
     * A marshaller of {@link VectorSchemaRoot}s whose received roots are allocated (or, lent,
     * accounted) in {@code allocator}.
     */
    public static MethodDescriptor.Marshaller<VectorSchemaRoot> marshaller(BufferAllocator allocator) {
        return new Marshaller(allocator);
    }

    /**
     * A schema with the bytes it was known by: the last one a marshaller wrote (its whole IPC
     * message) or read (its message's metadata, the flatbuffer without the stream's framing),
     * which the next batch of the same schema reuses instead of writing or parsing it again.
     */
    private record KnownSchema(Schema schema, ByteBuffer bytes) {
    }

    private static final class Marshaller implements MethodDescriptor.Marshaller<VectorSchemaRoot> {
        private final BufferAllocator allocator;
        /** The schema last written, and its message; read and replaced by any thread. */
        private volatile KnownSchema written;
        /** The schema last read, and its message's metadata as it came (this process's copy). */
        private volatile KnownSchema read;

        Marshaller(BufferAllocator allocator) {
            this.allocator = allocator;
        }

        @Override
        public InputStream stream(VectorSchemaRoot root) {
            return new Batch(root, this);
        }

        @Override
        public VectorSchemaRoot parse(InputStream stream) {
            try {
                if (stream instanceof LentMessage lent && BoundsChecking.BOUNDS_CHECKING_ENABLED) {
                    return inPlace(lent, this);
                }
                return read(stream, this);
            } catch (IOException e) {
                throw new UncheckedIOException("not an Arrow IPC stream of one record batch: " + e.getMessage(), e);
            }
        }

        /** {@code schema}'s IPC message, written once for a run of batches of one schema. */
        byte[] schemaMessage(Schema schema) throws IOException {
            KnownSchema k = written;
            if (k != null && (k.schema() == schema || k.schema().equals(schema))) {
                return k.bytes().array();
            }
            ByteArrayOutputStream b = new ByteArrayOutputStream(256);
            MessageSerializer.serialize(new WriteChannel(Channels.newChannel(b)), schema, IPC);
            byte[] message = b.toByteArray();
            written = new KnownSchema(schema, ByteBuffer.wrap(message));
            return message;
        }

        /**
         * The schema a message's metadata describes, parsed once for a run of batches whose
         * metadata is byte for byte the same (compared in this process's copy of it).
         */
        Schema schemaOf(MessageMetadataResult message) {
            ByteBuffer metadata = message.getMessageBuffer().duplicate();
            KnownSchema k = read;
            if (k != null && k.bytes().equals(metadata)) {
                return k.schema();
            }
            Schema schema = MessageSerializer.deserializeSchema(message);
            ByteBuffer copy = ByteBuffer.allocate(metadata.remaining());
            copy.put(metadata).flip();
            read = new KnownSchema(schema, copy);
            return schema;
        }
    }

    /**
     * A root as an IPC stream: its head (the schema's message and the batch's metadata), its body
     * (the buffers, each padded to 8 bytes, as the metadata places them) and its end-of-stream
     * marker; the buffers are held from here until the stream is closed.
     */
    private static final class Batch extends InputStream implements LendableMessage, KnownLength {
        private final ArrowRecordBatch batch;
        private final byte[] head;
        private final byte[] tail;
        private final long bodyBytes;
        private ByteArrayInputStream bytes;
        private boolean closed;

        Batch(VectorSchemaRoot root, Marshaller marshaller) {
            for (Field f : root.getSchema().getFields()) {
                if (f.getDictionary() != null) {
                    throw new IllegalArgumentException("field '" + f.getName() + "' is dictionary-encoded: Arrow "
                            + "batches over gRPC carry no dictionaries; send its decoded vector");
                }
            }
            this.batch = new VectorUnloader(root).getRecordBatch();
            try {
                ByteArrayOutputStream h = new ByteArrayOutputStream(256);
                WriteChannel out = new WriteChannel(Channels.newChannel(h));
                out.write(marshaller.schemaMessage(root.getSchema()));
                ByteBuffer meta = MessageSerializer.serializeMetadata(batch, IPC);
                MessageSerializer.writeMessageBuffer(out, meta.remaining(), meta, IPC);
                this.head = h.toByteArray();
                this.tail = END_OF_STREAM;
            } catch (IOException | RuntimeException e) {
                batch.close();
                throw e instanceof IOException io ? new UncheckedIOException(io) : (RuntimeException) e;
            }
            this.bodyBytes = batch.computeBodyLength();
        }

        @Override
        public byte[] head() {
            return head;
        }

        @Override
        public long bodyBytes() {
            return bodyBytes;
        }

        @Override
        public void writeBody(MemorySegment to) throws IOException {
            if (closed) {
                throw new IOException("the batch's stream is closed");
            }
            List<ArrowBuf> buffers = batch.getBuffers();
            List<ArrowBuffer> layout = batch.getBuffersLayout();
            long at = 0;
            for (int i = 0; i < buffers.size(); i++) {
                ArrowBuf b = buffers.get(i);
                ArrowBuffer place = layout.get(i);
                if (place.getOffset() > at) {
                    to.asSlice(at, place.getOffset() - at).fill((byte) 0);
                }
                long n = place.getSize();
                if (n > 0) {
                    MemorySegment.copy(MemorySegment.ofAddress(b.memoryAddress()).reinterpret(n), 0, to,
                            place.getOffset(), n);
                }
                at = place.getOffset() + n;
            }
            if (at < bodyBytes) {
                to.asSlice(at, bodyBytes - at).fill((byte) 0);
            }
        }

        @Override
        public byte[] tail() {
            return tail;
        }

        /** The whole stream as bytes, made once, where it is read as a stream (over HTTP/2, or with no room to lend). */
        private ByteArrayInputStream bytes() throws IOException {
            if (bytes == null) {
                if (closed) {
                    throw new IOException("the batch's stream is closed");
                }
                long whole = head.length + bodyBytes + tail.length;
                if (whole > Integer.MAX_VALUE - 16) {
                    throw new IOException("a batch of " + whole + " bytes: larger than a gRPC message can be");
                }
                byte[] all = new byte[(int) whole];
                System.arraycopy(head, 0, all, 0, head.length);
                writeBody(MemorySegment.ofArray(all).asSlice(head.length, bodyBytes));
                System.arraycopy(tail, 0, all, (int) (head.length + bodyBytes), tail.length);
                bytes = new ByteArrayInputStream(all);
            }
            return bytes;
        }

        @Override
        public int read() throws IOException {
            return bytes().read();
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            return bytes().read(b, off, len);
        }

        @Override
        public int available() throws IOException {
            return bytes == null ? (int) Math.min(Integer.MAX_VALUE, head.length + bodyBytes + tail.length)
                    : bytes.available();
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                batch.close();
            }
        }
    }

    /** A lent batch: its head parsed from this process's copy, its buffers where the sender put them. */
    private static VectorSchemaRoot inPlace(LentMessage lent, Marshaller marshaller) throws IOException {
        BufferAllocator allocator = marshaller.allocator;
        byte[] head = lent.head();
        ReadChannel in = new ReadChannel(Channels.newChannel(new ByteArrayInputStream(head)));
        MessageMetadataResult schemaMessage = MessageSerializer.readMessage(in);
        if (schemaMessage == null || schemaMessage.getMessage().headerType() != MessageHeader.Schema) {
            throw new IOException("the stream does not begin with a schema");
        }
        Schema schema = marshaller.schemaOf(schemaMessage);
        MessageMetadataResult batchMessage = MessageSerializer.readMessage(in);
        if (batchMessage == null || batchMessage.getMessage().headerType() != MessageHeader.RecordBatch) {
            throw new IOException("the schema is not followed by a record batch");
        }
        if (in.bytesRead() != head.length) {
            throw new IOException("the head has " + (head.length - in.bytesRead()) + " bytes past the batch's metadata");
        }
        MemorySegment body = lent.body();
        if (batchMessage.getMessageBodyLength() != body.byteSize()) {
            throw new IOException("the batch's metadata says a body of " + batchMessage.getMessageBodyLength()
                    + " bytes; " + body.byteSize() + " were lent");
        }
        if (!Arrays.equals(lent.tail(), END_OF_STREAM)) {
            throw new IOException("the batch is not followed by the end of the stream");
        }
        refuseDictionaries(schema);
        LentMessage.Lease lease = lent.keep();
        ArrowBuf whole;
        try {
            whole = allocator.wrapForeignAllocation(new ForeignAllocation(body.byteSize(), body.address()) {
                @Override
                protected void release0() {
                    lease.close();
                }
            });
        } catch (RuntimeException e) {
            lease.close();
            throw e;
        }
        return load(schema, batchMessage, whole, allocator);
    }

    /**
     * {@code body} sliced as the batch's metadata places its buffers and loaded into a new root
     * of {@code allocator}; the body is let go of either way (the root holds its slices).
     */
    private static VectorSchemaRoot load(Schema schema, MessageMetadataResult batchMessage, ArrowBuf body,
                                         BufferAllocator allocator) throws IOException {
        ArrowRecordBatch sliced;
        try {
            sliced = MessageSerializer.deserializeRecordBatch(batchMessage, body); // lets go of the body once sliced
        } catch (IOException | RuntimeException e) {
            body.close(); // not sliced: nothing else holds it
            throw e;
        }
        VectorSchemaRoot root = null;
        try (ArrowRecordBatch batch = sliced) {
            root = VectorSchemaRoot.create(schema, allocator);
            new VectorLoader(root).load(batch);
            return root;
        } catch (RuntimeException e) {
            if (root != null) {
                root.close();
            }
            throw e;
        }
    }

    private static void refuseDictionaries(Schema schema) throws IOException {
        for (Field f : schema.getFields()) {
            if (f.getDictionary() != null) {
                throw new IOException("field '" + f.getName() + "' is dictionary-encoded; Arrow batches over gRPC "
                        + "carry no dictionaries: send its decoded vector");
            }
        }
    }

    private static byte[] endOfStream() {
        ByteArrayOutputStream t = new ByteArrayOutputStream(8);
        try {
            ArrowStreamWriter.writeEndOfStream(new WriteChannel(Channels.newChannel(t)), IPC);
        } catch (IOException e) {
            throw new UncheckedIOException(e); // into memory: does not happen
        }
        return t.toByteArray();
    }

    /**
     * A batch that came as bytes (an IPC stream of a schema and a record batch, as any Arrow
     * writer writes it): read into a root of the marshaller's allocator. A dictionary batch is
     * refused, as a dictionary-encoded field is where the batch was lent.
     */
    private static VectorSchemaRoot read(InputStream stream, Marshaller marshaller) throws IOException {
        ReadChannel in = new ReadChannel(Channels.newChannel(stream));
        MessageMetadataResult schemaMessage = MessageSerializer.readMessage(in);
        if (schemaMessage == null || schemaMessage.getMessage().headerType() != MessageHeader.Schema) {
            throw new IOException("the stream does not begin with a schema");
        }
        Schema schema = marshaller.schemaOf(schemaMessage);
        refuseDictionaries(schema);
        MessageMetadataResult batchMessage = MessageSerializer.readMessage(in);
        if (batchMessage == null) {
            throw new IOException("the stream has no record batch");
        }
        if (batchMessage.getMessage().headerType() != MessageHeader.RecordBatch) {
            throw new IOException(batchMessage.getMessage().headerType() == MessageHeader.DictionaryBatch
                    ? "a dictionary batch came; Arrow batches over gRPC carry no dictionaries: send decoded vectors"
                    : "the schema is not followed by a record batch");
        }
        long body = batchMessage.getMessageBodyLength();
        // a message's bytes are all here: a body longer than what is left is refused before it is allocated
        if ((stream instanceof KnownLength || stream instanceof ByteArrayInputStream) && stream.available() < body) {
            throw new IOException("the batch's metadata says a body of " + body + " bytes; " + stream.available()
                    + " are left in the message");
        }
        BufferAllocator allocator = marshaller.allocator;
        return load(schema, batchMessage, MessageSerializer.readMessageBody(in, body, allocator), allocator);
    }
}
