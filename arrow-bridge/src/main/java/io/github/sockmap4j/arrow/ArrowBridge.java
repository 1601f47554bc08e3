package io.github.sockmap4j.arrow;

import java.io.IOException;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.dictionary.DictionaryProvider;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;

/**
 * Arrow record batches in the IPC streaming format over a byte channel: a
 * {@code SockmapChannel} for the fast path, or any other.
 *
 * <p>No body buffer passes through the JVM heap: Arrow's writer hands each {@code ArrowBuf} to
 * the channel as a direct {@code ByteBuffer} view of its off-heap memory, which a
 * {@code SockmapChannel} passes to {@code send(2)} as it is; the reader has the channel read into
 * direct views of buffers from the caller's allocator. Small metadata (the flatbuffer message
 * headers) is built on the heap by Arrow. The kernel still copies once on each side
 * (docs/zero-copy.md).
 *
 * <p>Ownership: the writer's root and its buffers stay the caller's; the reader's root and every
 * buffer it loads belong to the given allocator until the reader is closed, which frees them.
 * Close readers before their allocator, or the allocator reports what is still outstanding.
 */
public final class ArrowBridge {
    private ArrowBridge() {
    }

    /** A stream writer of {@code root}'s batches to {@code channel}; call start(), writeBatch(), end(). */
    public static ArrowStreamWriter writer(VectorSchemaRoot root, WritableByteChannel channel) {
        return new ArrowStreamWriter(root, null, channel);
    }

    /**
     * A stream writer whose dictionary-encoded columns take their dictionaries from
     * {@code dictionaries} (written once, ahead of the first batch); they stay the caller's.
     */
    public static ArrowStreamWriter writer(VectorSchemaRoot root, DictionaryProvider dictionaries,
            WritableByteChannel channel) {
        return new ArrowStreamWriter(root, dictionaries, channel);
    }

    /** A stream reader from {@code channel} whose buffers come from {@code allocator}. */
    public static ArrowStreamReader reader(ReadableByteChannel channel, BufferAllocator allocator) {
        return new ArrowStreamReader(channel, allocator);
    }

    /** Writes {@code root} as one complete stream of one batch (schema, batch, end-of-stream). */
    public static void writeStream(VectorSchemaRoot root, WritableByteChannel channel) throws IOException {
        try (ArrowStreamWriter w = writer(root, channel)) {
            w.start();
            w.writeBatch();
            w.end();
        }
    }
}
