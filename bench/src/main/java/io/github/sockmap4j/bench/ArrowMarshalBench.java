package io.github.sockmap4j.bench;

import io.github.sockmap4j.arrow.grpc.ArrowGrpc;
import io.grpc.MethodDescriptor;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * What {@link ArrowGrpc}'s marshaller costs a message by itself, no transport: a root of the
 * demo's candidates' shape (ids, scores, 384-float embeddings, chunks) streamed to bytes and
 * parsed back, 50,000 times a round, 8 rounds, the best of the last five printed (ns). {@code
 * vary}: 16 roots whose schemas differ in their metadata, in turn (no schema repeats). To
 * compare with another version of the marshaller, put its classes first on the class path.
 *
 * <p>Usage: {@code ArrowMarshalBench ROWS [vary]}.
 */
public final class ArrowMarshalBench {
    private ArrowMarshalBench() {
    }

    private static VectorSchemaRoot batch(BufferAllocator a, String q, int rows, int dim) {
        Schema schema = new Schema(List.of(
                Field.notNullable("id", new ArrowType.Int(32, true)),
                Field.notNullable("score", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)),
                new Field("embedding", FieldType.notNullable(new ArrowType.FixedSizeList(dim)), List.of(new Field("item",
                        FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null))),
                Field.notNullable("chunk", ArrowType.Utf8.INSTANCE)), Map.of("question", q));
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, a);
        IntVector ids = (IntVector) root.getVector("id");
        Float4Vector scores = (Float4Vector) root.getVector("score");
        FixedSizeListVector emb = (FixedSizeListVector) root.getVector("embedding");
        VarCharVector chunks = (VarCharVector) root.getVector("chunk");
        ids.allocateNew(rows);
        scores.allocateNew(rows);
        chunks.allocateNew(rows);
        emb.setInitialCapacity(rows);
        emb.allocateNew();
        Float4Vector items = (Float4Vector) emb.getDataVector();
        for (int i = 0; i < rows; i++) {
            ids.set(i, i);
            scores.set(i, 1f / (i + 1));
            chunks.setSafe(i, ("chunk " + i).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            emb.setNotNull(i);
            for (int d = 0; d < dim; d++) {
                items.setSafe(i * dim + d, d);
            }
        }
        items.setValueCount(rows * dim);
        root.setRowCount(rows);
        return root;
    }

    public static void main(String[] args) throws Exception {
        BufferAllocator a = new RootAllocator();
        MethodDescriptor.Marshaller<VectorSchemaRoot> m = ArrowGrpc.marshaller(a);
        int rows = Integer.parseInt(args[0]);
        boolean vary = args.length > 1 && args[1].equals("vary");
        VectorSchemaRoot[] roots = new VectorSchemaRoot[vary ? 16 : 1];
        for (int i = 0; i < roots.length; i++) {
            roots[i] = batch(a, "question " + i, rows, 384);
        }
        long best = Long.MAX_VALUE;
        for (int round = 0; round < 8; round++) {
            int n = 50_000;
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                byte[] bytes;
                try (InputStream s = m.stream(roots[i % roots.length])) {
                    bytes = s.readAllBytes();
                }
                try (VectorSchemaRoot r = m.parse(new ByteArrayInputStream(bytes))) {
                    if (r.getRowCount() != rows) {
                        throw new AssertionError("parsed " + r.getRowCount() + " rows of " + rows);
                    }
                }
            }
            long ns = (System.nanoTime() - t0) / n;
            if (round >= 3) best = Math.min(best, ns);
        }
        System.out.println("rows " + rows + (vary ? " varying schema" : " one schema") + ": best ns a stream+parse " + best);
        for (VectorSchemaRoot r : roots) {
            r.close();
        }
        a.close();
    }
}
