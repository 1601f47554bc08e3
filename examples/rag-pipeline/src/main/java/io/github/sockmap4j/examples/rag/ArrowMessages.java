package io.github.sockmap4j.examples.rag;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * The pipeline's messages as Arrow record batches: a question's embedding, and search candidates
 * with their vectors and chunks. The question text rides in the schema's metadata so the gateway
 * forwards each service's reply as it came. The stages send them as roots ({@code ArrowGrpc}'s
 * marshaller: an Arrow IPC stream of one schema and one batch, lent where the connection lends);
 * {@code encode}/{@code decode} are the same messages as IPC bytes.
 */
@SuppressWarnings("restricted") // MemorySegment.reinterpret over ArrowBuf memory (--enable-native-access)
public final class ArrowMessages {
    static final String QUESTION = "rag.question";
    private static final ValueLayout.OfFloat FLOAT_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** A question and its embedding. */
    public record Query(String question, float[] vector) {
    }

    /** Search candidates, best first, with the question they answer. */
    public record Candidates(String question, int[] ids, float[] scores, float[][] vectors, String[] chunks) {
        public int size() {
            return ids.length;
        }
    }

    private ArrowMessages() {
    }

    private static Field vectorField(int dim) {
        return new Field("embedding", FieldType.notNullable(new ArrowType.FixedSizeList(dim)),
                List.of(new Field("item", FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null)));
    }

    /** A query as a root of {@code alloc}'s, the caller's to close. */
    public static VectorSchemaRoot queryRoot(BufferAllocator alloc, Query q) {
        Schema schema = new Schema(List.of(vectorField(q.vector().length)), Map.of(QUESTION, q.question()));
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, alloc);
        try {
            FixedSizeListVector emb = (FixedSizeListVector) root.getVector(0);
            fillVectors(emb, new float[][] {q.vector()});
            root.setRowCount(1);
            return root;
        } catch (RuntimeException e) {
            root.close();
            throw e;
        }
    }

    /** The query a root holds. */
    public static Query query(VectorSchemaRoot root) {
        if (root.getRowCount() != 1 || !(root.getVector("embedding") instanceof FixedSizeListVector emb)) {
            throw new IllegalArgumentException("a query is one row of one embedding");
        }
        return new Query(question(root), readVectors(emb, 1)[0]);
    }

    public static byte[] encodeQuery(BufferAllocator alloc, Query q) {
        try (VectorSchemaRoot root = queryRoot(alloc, q)) {
            return write(root);
        }
    }

    public static Query decodeQuery(BufferAllocator alloc, byte[] ipc) {
        try (ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(ipc), alloc)) {
            VectorSchemaRoot root = reader.getVectorSchemaRoot();
            if (!reader.loadNextBatch()) {
                throw new IllegalArgumentException("a query is one row of one embedding");
            }
            return query(root);
        } catch (IOException e) {
            throw new UncheckedIOException("not an Arrow IPC query: " + e.getMessage(), e);
        }
    }

    public static byte[] encodeCandidates(BufferAllocator alloc, Candidates c, int dim) {
        try (VectorSchemaRoot root = candidatesRoot(alloc, c, dim)) {
            return write(root);
        }
    }

    /** Candidates as a root of {@code alloc}'s, the caller's to close. */
    public static VectorSchemaRoot candidatesRoot(BufferAllocator alloc, Candidates c, int dim) {
        Schema schema = new Schema(List.of(
                Field.notNullable("id", new ArrowType.Int(32, true)),
                Field.notNullable("score", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)),
                vectorField(dim),
                Field.notNullable("chunk", ArrowType.Utf8.INSTANCE)), Map.of(QUESTION, c.question()));
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, alloc);
        try {
            int n = c.size();
            IntVector ids = (IntVector) root.getVector("id");
            Float4Vector scores = (Float4Vector) root.getVector("score");
            VarCharVector chunks = (VarCharVector) root.getVector("chunk");
            ids.allocateNew(n);
            scores.allocateNew(n);
            chunks.allocateNew(n);
            for (int i = 0; i < n; i++) {
                ids.set(i, c.ids()[i]);
                scores.set(i, c.scores()[i]);
                chunks.setSafe(i, c.chunks()[i].getBytes(StandardCharsets.UTF_8));
            }
            fillVectors((FixedSizeListVector) root.getVector("embedding"), c.vectors());
            for (FieldVector v : root.getFieldVectors()) {
                v.setValueCount(n);
            }
            root.setRowCount(n);
            return root;
        } catch (RuntimeException e) {
            root.close();
            throw e;
        }
    }

    public static Candidates decodeCandidates(BufferAllocator alloc, byte[] ipc) {
        try (ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(ipc), alloc)) {
            VectorSchemaRoot root = reader.getVectorSchemaRoot();
            if (!reader.loadNextBatch()) {
                throw new IllegalArgumentException("candidates: the stream has no record batch");
            }
            return candidates(root);
        } catch (IOException e) {
            throw new UncheckedIOException("not an Arrow IPC candidates batch: " + e.getMessage(), e);
        }
    }

    /** The candidates a root holds. */
    public static Candidates candidates(VectorSchemaRoot root) {
        int n = root.getRowCount();
        {
            IntVector ids = (IntVector) root.getVector("id");
            Float4Vector scores = (Float4Vector) root.getVector("score");
            VarCharVector chunks = (VarCharVector) root.getVector("chunk");
            int[] outIds = new int[n];
            float[] outScores = new float[n];
            String[] outChunks = new String[n];
            for (int i = 0; i < n; i++) {
                outIds[i] = ids.get(i);
                outScores[i] = scores.get(i);
                outChunks[i] = new String(chunks.get(i), StandardCharsets.UTF_8);
            }
            return new Candidates(question(root), outIds, outScores,
                    readVectors((FixedSizeListVector) root.getVector("embedding"), n), outChunks);
        }
    }

    private static String question(VectorSchemaRoot root) {
        String q = root.getSchema().getCustomMetadata().get(QUESTION);
        return q == null ? "" : q;
    }

    private static void fillVectors(FixedSizeListVector list, float[][] vectors) {
        int dim = list.getListSize();
        list.setInitialCapacity(vectors.length);
        list.allocateNew();
        Float4Vector items = (Float4Vector) list.getDataVector();
        if (items.getValueCapacity() < vectors.length * dim) {
            items.setInitialCapacity(vectors.length * dim);
            items.allocateNew();
        }
        // Bulk copies into the Arrow buffer's native memory (little-endian floats, as Arrow lays them out).
        MemorySegment data = MemorySegment.ofAddress(items.getDataBuffer().memoryAddress())
                .reinterpret(items.getDataBuffer().capacity());
        for (int r = 0; r < vectors.length; r++) {
            if (vectors[r].length != dim) {
                throw new IllegalArgumentException("vector " + r + " has " + vectors[r].length + " dimensions, not " + dim);
            }
            list.setNotNull(r);
            MemorySegment.copy(vectors[r], 0, data, FLOAT_LE, (long) r * dim * Float.BYTES, dim);
        }
        for (int i = 0; i < vectors.length * dim; i++) {
            items.setIndexDefined(i);
        }
        items.setValueCount(vectors.length * dim);
        list.setValueCount(vectors.length);
    }

    private static float[][] readVectors(FixedSizeListVector list, int rows) {
        int dim = list.getListSize();
        Float4Vector items = (Float4Vector) list.getDataVector();
        if (items.getValueCount() < rows * dim || items.getDataBuffer().capacity() < (long) rows * dim * Float.BYTES) {
            throw new IllegalArgumentException("embedding column holds " + items.getValueCount() + " floats in "
                    + items.getDataBuffer().capacity() + " bytes, not " + rows * dim);
        }
        MemorySegment data = MemorySegment.ofAddress(items.getDataBuffer().memoryAddress())
                .reinterpret((long) rows * dim * Float.BYTES);
        float[][] out = new float[rows][dim];
        for (int r = 0; r < rows; r++) {
            MemorySegment.copy(data, FLOAT_LE, (long) r * dim * Float.BYTES, out[r], 0, dim);
        }
        return out;
    }

    private static byte[] write(VectorSchemaRoot root) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(64 + root.getRowCount() * 64);
        try (ArrowStreamWriter w = new ArrowStreamWriter(root, null, Channels.newChannel(bytes))) {
            w.start();
            w.writeBatch();
            w.end();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }
}
