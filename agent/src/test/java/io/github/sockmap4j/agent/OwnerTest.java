package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.AlphaChars;
import net.jqwik.api.constraints.NumericChars;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

/** Owners as the rules journal writes them: the forms earlier agents wrote read back the same. */
class OwnerTest {
    @Test
    void theJournalsFormsReadBackAsTheirKinds() {
        assertEquals(Owner.USER, Owner.parse("user"));
        assertEquals(Owner.connection(7), Owner.parse("conn:7"));
        assertEquals(Owner.process(4242), Owner.parse("pid:4242"));
        assertEquals(Owner.pod("default", "vector-db-0"), Owner.parse("pod:default/vector-db-0"));
        assertEquals(Owner.service("default/vector-db"), Owner.parse("svc:default/vector-db"));
        assertEquals(Owner.named("bench"), Owner.parse("bench"));
        assertEquals("pod:default/vector-db-0", Owner.pod("default", "vector-db-0").toString());
    }

    @Test
    void aNamedOwnerCannotPassForAKind() {
        assertThrows(IllegalArgumentException.class, () -> Owner.named("pod:default/x"));
        assertThrows(IllegalArgumentException.class, () -> Owner.named("user"));
        assertThrows(IllegalArgumentException.class, () -> Owner.named(""));
        assertThrows(IllegalArgumentException.class, () -> Owner.pod("a\tb", "c"), "a journal field separator");
    }

    @Property
    void everyOwnerReadsBackAsWritten(@ForAll @AlphaChars @NumericChars @StringLength(min = 1, max = 20) String a,
                                      @ForAll @AlphaChars @StringLength(min = 1, max = 20) String b) {
        for (Owner o : new Owner[] {Owner.pod(a, b), Owner.service(a + "/" + b), Owner.connection(a.length()),
                Owner.process(b.length()), Owner.USER}) {
            assertEquals(o, Owner.parse(o.toString()));
        }
        if (!a.equals("user")) {
            assertEquals(Owner.named(a), Owner.parse(a));
        }
    }
}
