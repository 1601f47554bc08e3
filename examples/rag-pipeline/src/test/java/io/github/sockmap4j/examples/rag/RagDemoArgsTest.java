package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** Arguments the demo refuses before it starts anything, with the message naming what to give. */
class RagDemoArgsTest {
    static String refused(String... args) {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream was = System.err;
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try {
            assertEquals(2, new CommandLine(new RagDemo(new PrintStream(new ByteArrayOutputStream()))).execute(args));
        } finally {
            System.setErr(was);
        }
        return err.toString(StandardCharsets.UTF_8);
    }

    @Test
    void anUnknownProfileIsNamedWithTheOnesThereAre() {
        String e = refused("--profile=spinning");
        assertTrue(e.contains("--profile is standard or polling, not 'spinning'"), e);
    }

    @Test
    void pairedNeedsBothPathsAJvmPerStageAndASlice() {
        for (String[] args : new String[][] {{"--paired", "--mode=fast"}, {"--paired", "--in-process", "--topology=loopback"}}) {
            String e = refused(args);
            assertTrue(e.contains("--paired runs both paths, a JVM per stage: leave out --in-process and --mode"),
                    String.join(" ", args) + ": " + e);
        }
        for (String[] args : new String[][] {{"--slices=0"}, {"--paired", "--requests=3", "--slices=4"}}) {
            String e = refused(args);
            assertTrue(e.contains("--slices is at least 1 and at most --requests, not "), String.join(" ", args) + ": " + e);
        }
    }

    @Test
    void pollingNeedsAJvmPerStage() {
        String e = refused("--profile=polling", "--in-process", "--topology=loopback");
        assertTrue(e.contains("leave out --in-process"), e);
    }

    @Test
    void handlersAreLoopsOrPoolAndDifferOnlyWithAJvmPerStage() {
        for (String[] args : new String[][] {{"--handlers=threads"}, {"--plain-handlers=direct"}}) {
            String e = refused(args);
            assertTrue(e.contains("--handlers and --plain-handlers are loops or pool, not '"), String.join(" ", args) + ": " + e);
        }
        String e = refused("--plain-handlers=pool", "--in-process", "--topology=loopback", "--mode=plain");
        assertTrue(e.contains("--plain-handlers needs a JVM per stage: leave out --in-process"), e);
    }

    @Test
    void theCurvesLoadsAreFractionsOfPlainTcpsMaximum() {
        for (String bad : new String[] {"--loads=0.4,forty", "--loads=0", "--loads=2.5", "--loads=-0.1"}) {
            String e = refused(bad);
            assertTrue(e.contains("--loads are fractions of plain TCP's maximum throughput, above 0 and at most 2 "
                    + "(0.4 for 40%), not '"), bad + ": " + e);
        }
        for (String bad : new String[] {"--throughput-seconds=0", "--seconds-per-load=0"}) {
            String e = refused(bad);
            assertTrue(e.contains("the load curve measures plain TCP's maximum first: --throughput-seconds and "
                    + "--seconds-per-load must be positive (or give --rate for one point)"), bad + ": " + e);
        }
    }

    @Test
    void theMeshRunsBothPathsInTheNodesPodsWithStagesUnchanged() {
        for (String[] args : new String[][] {{"--mesh", "--topology=loopback"}, {"--mesh", "--no-paired"},
            {"--mesh", "--mode=fast"}}) {
            String e = refused(args);
            assertTrue(e.contains("--mesh runs both paths at once in the node topology's pods"), String.join(" ", args)
                    + ": " + e);
        }
        String e = refused("--mesh", "--profile=polling");
        assertTrue(e.contains("--mesh runs every stage unchanged on both paths: leave out --profile=polling"), e);
    }
}
