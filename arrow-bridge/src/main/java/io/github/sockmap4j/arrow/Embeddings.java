package io.github.sockmap4j.arrow;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
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
 * The embeddings batches the tests, benchmarks and examples move: {@code id} (int32), optionally
 * {@code chunk} (nullable UTF-8, null on every 7th row from the 4th), and {@code embedding}
 * ({@code FixedSizeList<Float4>} of {@code dim}, seeded random values).
 */
public final class Embeddings {
    private Embeddings() {
    }

    /** The schema of {@link #random}'s batches. */
    public static Schema schema(int dim, boolean withText) {
        List<Field> fields = new ArrayList<>();
        fields.add(new Field("id", FieldType.notNullable(new ArrowType.Int(32, true)), null));
        if (withText) {
            fields.add(new Field("chunk", FieldType.nullable(new ArrowType.Utf8()), null));
        }
        fields.add(new Field("embedding", FieldType.notNullable(new ArrowType.FixedSizeList(dim)), List.of(
                new Field("x", FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null))));
        return new Schema(fields);
    }

    /** A batch of {@code rows} rows from {@code allocator}; the caller closes it. Same seed, same batch. */
    public static VectorSchemaRoot random(BufferAllocator allocator, int rows, int dim, long seed, boolean withText) {
        VectorSchemaRoot root = VectorSchemaRoot.create(schema(dim, withText), allocator);
        try {
            IntVector id = (IntVector) root.getVector("id");
            VarCharVector chunk = withText ? (VarCharVector) root.getVector("chunk") : null;
            FixedSizeListVector emb = (FixedSizeListVector) root.getVector("embedding");
            Float4Vector xs = (Float4Vector) emb.getDataVector();
            id.allocateNew(rows);
            if (chunk != null) {
                chunk.allocateNew(rows);
            }
            emb.allocateNew();
            xs.allocateNew(rows * dim);
            Random r = new Random(seed);
            for (int i = 0; i < rows; i++) {
                id.set(i, i);
                if (chunk != null && i % 7 != 3) {
                    chunk.setSafe(i, ("chunk " + i).getBytes(StandardCharsets.UTF_8));
                } else if (chunk != null) {
                    chunk.setNull(i);
                }
                emb.setNotNull(i);
                for (int d = 0; d < dim; d++) {
                    xs.set(i * dim + d, r.nextFloat());
                }
            }
            xs.setValueCount(rows * dim);
            root.setRowCount(rows);
            return root;
        } catch (RuntimeException e) {
            root.close();
            throw e;
        }
    }
}
