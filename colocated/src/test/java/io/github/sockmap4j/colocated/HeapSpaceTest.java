package io.github.sockmap4j.colocated;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** The heap's free runs: places never overlap, stay aligned and inside, and all come back as one run. */
class HeapSpaceTest {
    private static final long SIZE = 1 << 20;

    @Property(tries = 300)
    void placesNeverOverlapAndEveryByteComesBack(@ForAll @Size(max = 200) List<@IntRange(min = 1, max = 70_000) Integer> sizes,
                                                 @ForAll @Size(max = 200) List<@IntRange(min = 0, max = 3) Integer> frees) {
        HeapSpace space = new HeapSpace(SIZE);
        List<long[]> taken = new ArrayList<>();
        for (int i = 0; i < sizes.size(); i++) {
            long at = space.take(sizes.get(i));
            if (at >= 0) {
                assertEquals(0, at % HeapSpace.ALIGNMENT);
                assertTrue(at + sizes.get(i) <= SIZE);
                for (long[] t : taken) {
                    assertTrue(at + HeapSpace.round(sizes.get(i)) <= t[0] || t[0] + HeapSpace.round(t[1]) <= at,
                            "place " + at + " overlaps " + t[0]);
                }
                taken.add(new long[] {at, sizes.get(i)});
            } else {
                assertTrue(space.largestFree() < HeapSpace.round(sizes.get(i)));
            }
            if (i < frees.size() && frees.get(i) == 0 && !taken.isEmpty()) {
                long[] t = taken.remove(taken.size() / 2);
                space.give(t[0], t[1]);
            }
        }
        for (long[] t : taken) {
            space.give(t[0], t[1]);
        }
        assertEquals(0, space.used());
        assertEquals(SIZE, space.largestFree(), "the free runs merged back into one");
    }

    @Test
    void givingBackWhatIsFreeIsRefused() {
        HeapSpace space = new HeapSpace(SIZE);
        long at = space.take(100);
        space.give(at, 100);
        assertThrows(IllegalStateException.class, () -> space.give(at, 100));
        assertThrows(IllegalStateException.class, () -> space.give(SIZE - 64, 128));
    }
}
