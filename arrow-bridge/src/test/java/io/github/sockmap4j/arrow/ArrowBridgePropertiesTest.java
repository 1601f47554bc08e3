package io.github.sockmap4j.arrow;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tag;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.impl.UnionListWriter;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Generated schemas and batches over a SockmapChannel pair on the fast path: what arrives equals
 * what was sent and re-encodes to the same IPC bytes as Arrow's own writer produces; every
 * allocator closes with nothing outstanding.
 */
@Tag("kernel")
class ArrowBridgePropertiesTest {
    static ArrowBridgeTest bridge;

    @BeforeContainer
    static void start() throws IOException {
        bridge = new ArrowBridgeTest();
        bridge.start();
    }

    @AfterContainer
    static void stop() throws IOException {
        bridge.stop();
    }

    enum Column { INT32, FLOAT64, VARCHAR_WITH_NULLS, LIST_OF_INT32, EMBEDDING_384, EMBEDDING_768, EMBEDDING_1536 }

    @Provide
    Arbitrary<List<Column>> columns() {
        return Arbitraries.of(Column.class).list().ofMinSize(1).ofMaxSize(6);
    }

    @Property(tries = 40)
    void generatedBatchesArriveIdenticalAndByteForByte(@ForAll("columns") List<Column> columns,
            @ForAll @IntRange(min = 0, max = 300) int rows, @ForAll @IntRange(min = 1, max = 3) int batches,
            @ForAll long seed) throws Exception {
        try (BufferAllocator a = new RootAllocator(); VectorSchemaRoot root = batch(a, columns, rows, seed)) {
            byte[] received = bridge.roundTrip(root, batches, a);
            assertArrayEquals(ArrowBridgeTest.arrowBytes(root, batches), received, columns + " x " + rows + " rows");
        }
    }

    static Field field(Column c, int i) {
        String name = c.name().toLowerCase(java.util.Locale.ROOT) + "_" + i;
        return switch (c) {
            case INT32 -> new Field(name, FieldType.nullable(new ArrowType.Int(32, true)), null);
            case FLOAT64 -> new Field(name, FieldType.notNullable(
                    new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)), null);
            case VARCHAR_WITH_NULLS -> new Field(name, FieldType.nullable(new ArrowType.Utf8()), null);
            case LIST_OF_INT32 -> new Field(name, FieldType.nullable(new ArrowType.List()),
                    List.of(new Field("item", FieldType.nullable(new ArrowType.Int(32, true)), null)));
            case EMBEDDING_384, EMBEDDING_768, EMBEDDING_1536 -> new Field(name, FieldType.notNullable(
                    new ArrowType.FixedSizeList(Integer.parseInt(c.name().substring("EMBEDDING_".length())))),
                    List.of(new Field("x", FieldType.notNullable(
                            new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null)));
        };
    }

    static VectorSchemaRoot batch(BufferAllocator a, List<Column> columns, int rows, long seed) {
        List<Field> fields = new ArrayList<>();
        for (int i = 0; i < columns.size(); i++) {
            fields.add(field(columns.get(i), i));
        }
        VectorSchemaRoot root = VectorSchemaRoot.create(new Schema(fields), a);
        Random r = new Random(seed);
        for (FieldVector v : root.getFieldVectors()) {
            fill(v, rows, r);
        }
        root.setRowCount(rows);
        return root;
    }

    static void fill(FieldVector v, int rows, Random r) {
        if (v instanceof IntVector ints) {
            ints.allocateNew(rows);
            for (int i = 0; i < rows; i++) {
                if (r.nextInt(5) == 0) {
                    ints.setNull(i);
                } else {
                    ints.set(i, r.nextInt());
                }
            }
        } else if (v instanceof Float8Vector doubles) {
            doubles.allocateNew(rows);
            for (int i = 0; i < rows; i++) {
                doubles.set(i, r.nextGaussian());
            }
        } else if (v instanceof VarCharVector chars) {
            chars.allocateNew(rows);
            for (int i = 0; i < rows; i++) {
                if (r.nextInt(4) == 0) {
                    chars.setNull(i);
                } else {
                    chars.setSafe(i, ("chunk " + r.nextLong() + " é ✓").repeat(r.nextInt(4))
                            .getBytes(StandardCharsets.UTF_8));
                }
            }
        } else if (v instanceof ListVector list) {
            list.allocateNew(); // the offsets buffer, which a 0-row batch still writes
            UnionListWriter w = list.getWriter();
            for (int i = 0; i < rows; i++) {
                w.setPosition(i);
                if (r.nextInt(6) == 0) {
                    continue; // null: no startList for this row
                }
                w.startList();
                for (int k = r.nextInt(8); k > 0; k--) {
                    w.writeInt(r.nextInt());
                }
                w.endList();
            }
            w.setValueCount(rows);
        } else if (v instanceof FixedSizeListVector emb) {
            int dim = emb.getListSize();
            Float4Vector xs = (Float4Vector) emb.getDataVector();
            emb.allocateNew();
            xs.allocateNew(rows * dim);
            for (int i = 0; i < rows; i++) {
                emb.setNotNull(i);
                for (int d = 0; d < dim; d++) {
                    xs.set(i * dim + d, r.nextFloat());
                }
            }
            xs.setValueCount(rows * dim);
        }
        v.setValueCount(rows);
    }
}
