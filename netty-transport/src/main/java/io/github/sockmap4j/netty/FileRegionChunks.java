package io.github.sockmap4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.DefaultFileRegion;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Parts of a {@link DefaultFileRegion}, so that a file is sent in pieces its receiver's credit
 * covers instead of whole: a region larger than the in-flight bound would otherwise meet the
 * kernel's bound mid-file and go on by TCP (measured: 9% of a file sent as regions to a slow
 * reader redirected). A part is read from the region's file into a direct buffer, a copy in
 * user space that sendfile(2) avoids, made only while the receiver's credit is short of the
 * region; a region the credit covers goes whole, by sendfile.
 *
 * <p>Netty 4.2 gives no accessor for a region's {@link FileChannel}: it is read from the
 * region's field, where the class path allows it ({@link #available()} says whether it does;
 * where it does not, regions are sent whole, as before).
 */
final class FileRegionChunks {
    private static final Logger LOG = LoggerFactory.getLogger(FileRegionChunks.class);
    private static final VarHandle FILE = fileHandle();

    private FileRegionChunks() {
    }

    private static VarHandle fileHandle() {
        try {
            return MethodHandles.privateLookupIn(DefaultFileRegion.class, MethodHandles.lookup())
                    .findVarHandle(DefaultFileRegion.class, "file", FileChannel.class);
        } catch (ReflectiveOperationException | RuntimeException e) {
            LOG.debug("File regions are sent whole (their file channel cannot be read here): {}", e.toString());
            return null;
        }
    }

    /** Whether regions can be cut here. */
    static boolean available() {
        return FILE != null;
    }

    /**
     * {@code length} bytes of {@code region} from {@code offset} (past what it has transferred),
     * read from its file into a direct buffer; null when the region cannot be read here.
     */
    static ByteBuf read(DefaultFileRegion region, long offset, int length, ByteBufAllocator alloc) {
        FileChannel file = channel(region);
        if (file == null) {
            return null;
        }
        ByteBuf buf = alloc.directBuffer(length);
        try {
            long at = region.position() + region.transferred() + offset;
            while (buf.writableBytes() > 0) {
                int n = buf.writeBytes(file, at + buf.writerIndex(), buf.writableBytes());
                if (n < 0) {
                    break; // the file is shorter than the region says: what there is goes
                }
            }
            if (buf.readableBytes() == 0) {
                buf.release();
                return null;
            }
            return buf;
        } catch (IOException e) {
            buf.release();
            return null;
        }
    }

    private static FileChannel channel(DefaultFileRegion region) {
        if (FILE == null) {
            return null;
        }
        try {
            region.open();
        } catch (IOException e) {
            return null;
        }
        return (FileChannel) FILE.get(region);
    }
}
