package io.github.sockmap4j.arrow.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.handler.codec.DecoderException;
import io.netty.handler.codec.TooLongFrameException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ForeignAllocation;
import org.apache.arrow.vector.ipc.message.MessageSerializer;

/**
 * Reads Arrow IPC stream messages and passes on a {@link org.apache.arrow.vector.types.pojo.Schema}
 * for a schema message and an {@link org.apache.arrow.vector.ipc.message.ArrowRecordBatch} for each
 * batch; the end-of-stream marker is consumed silently.
 *
 * <p>A batch body is not copied out of Netty: its bytes are accounted to {@code allocator} as an
 * {@code ArrowBuf} over the received {@code ByteBuf}'s memory, which stays retained until the batch
 * and every vector loaded from it are closed. (Netty's cumulation may have copied it once, off the
 * heap, when the message spanned reads.) Whoever receives a batch closes it, usually right after
 * {@code new VectorLoader(root).load(batch)}. Dictionary batches are refused with a clear error.
 */
public final class ArrowBatchDecoder extends ByteToMessageDecoder {
    private static final int CONTINUATION = 0xFFFFFFFF;
    private final BufferAllocator allocator;
    private final long maxMessageBytes;
    private boolean failed;

    /** @param maxMessageBytes the largest message (header and body) accepted; larger is an error */
    public ArrowBatchDecoder(BufferAllocator allocator, long maxMessageBytes) {
        this.allocator = allocator;
        this.maxMessageBytes = maxMessageBytes;
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) throws Exception {
        if (failed) { // the stream is broken past recovery: drop what follows
            in.skipBytes(in.readableBytes());
            return;
        }
        try {
            decodeMessages(in, out);
        } catch (Exception e) {
            failed = true;
            in.skipBytes(in.readableBytes());
            throw e;
        }
    }

    private void decodeMessages(ByteBuf in, List<Object> out) throws Exception {
        while (true) {
            int start = in.readerIndex();
            if (in.readableBytes() < 8) {
                return;
            }
            int prefix = 4;
            int metaLen = in.getIntLE(start);
            if (metaLen == CONTINUATION) {
                metaLen = in.getIntLE(start + 4);
                prefix = 8;
            }
            if (metaLen == 0) { // end of stream
                in.skipBytes(prefix);
                continue;
            }
            if (metaLen < 0 || metaLen > maxMessageBytes) {
                throw new TooLongFrameException("Arrow message header of " + metaLen + " bytes (at most "
                        + maxMessageBytes + "): not an Arrow IPC stream, or raise maxMessageBytes");
            }
            if (in.readableBytes() < prefix + metaLen) {
                return;
            }
            ByteBuffer meta = ByteBuffer.allocate(metaLen).order(ByteOrder.LITTLE_ENDIAN);
            in.getBytes(start + prefix, meta);
            meta.flip();
            Message message = Message.getRootAsMessage(meta);
            long bodyLen = message.bodyLength();
            if (bodyLen < 0 || prefix + metaLen + bodyLen > maxMessageBytes) {
                throw new TooLongFrameException("Arrow message of " + (prefix + metaLen + bodyLen) + " bytes (at most "
                        + maxMessageBytes + "): raise maxMessageBytes");
            }
            if (in.readableBytes() < prefix + metaLen + bodyLen) {
                return;
            }
            in.skipBytes(prefix + metaLen);
            switch (message.headerType()) {
                case MessageHeader.Schema -> {
                    in.skipBytes((int) bodyLen);
                    out.add(MessageSerializer.deserializeSchema(message));
                }
                case MessageHeader.RecordBatch -> {
                    // deserializeRecordBatch takes over the reference wrap() returns: the batch's
                    // slices keep the memory, and with it the ByteBuf, until the batch is closed.
                    out.add(MessageSerializer.deserializeRecordBatch(message, wrap(in.readRetainedSlice((int) bodyLen))));
                }
                default -> throw new DecoderException("Arrow message type " + MessageHeader.name(message.headerType())
                        + " is not supported by ArrowBatchDecoder (schema and record batches only; "
                        + "use ArrowBridge.reader for dictionaries)");
            }
        }
    }

    /** An ArrowBuf over {@code body}'s memory that releases it when Arrow is done; a copy if it has no address. */
    private ArrowBuf wrap(ByteBuf body) {
        if (body.capacity() == 0 || !body.hasMemoryAddress()) {
            try {
                ArrowBuf copy = allocator.buffer(body.readableBytes());
                copy.setBytes(0, body.nioBuffer());
                copy.writerIndex(body.readableBytes());
                return copy;
            } finally {
                body.release();
            }
        }
        long address = body.memoryAddress() + body.readerIndex();
        ArrowBuf buf = allocator.wrapForeignAllocation(new ForeignAllocation(body.readableBytes(), address) {
            @Override
            protected void release0() {
                body.release();
            }
        });
        buf.writerIndex(body.readableBytes());
        return buf;
    }
}
