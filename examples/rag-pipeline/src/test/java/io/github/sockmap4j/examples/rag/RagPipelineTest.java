package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The four stages in this JVM: the same answers on both paths, the fast path's redirect carries them
 * over HTTP/2, and so do the co-located connections its stages agree on by default, which lend
 * the batches unless {@code sockmap4j.colocated.lendBytes} is 0.
 */
@Tag("kernel")
class RagPipelineTest {
    static final RagService.Settings SETTINGS = new RagService.Settings(384, 1500, 3, 32, 5, 0.3f);
    static final int QUESTIONS = 60;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void bothPathsGiveTheSameAnswersAndTheFastPathCarriesTheVectors() throws Exception {
        System.setProperty("rag.warmUpMillis", "100");
        List<String> plain = answers(false);
        // the fast path's HTTP/2 (the co-located transport, on by default, off for this part)
        String set = System.getProperty(ColocatedGrpc.SWITCH);
        System.setProperty(ColocatedGrpc.SWITCH, "false");
        SockmapStats before;
        SockmapStats after;
        List<String> fast;
        try {
            before = Sockmap.global().stats();
            fast = answers(true);
            after = Sockmap.global().stats();
        } finally {
            if (set == null) {
                System.clearProperty(ColocatedGrpc.SWITCH);
            } else {
                System.setProperty(ColocatedGrpc.SWITCH, set);
            }
        }
        assertEquals(plain, fast);
        for (String a : fast) {
            assertTrue(a.startsWith("Answer from this context (") && a.contains("[1] doc "), a);
        }
        // Each answer moves its candidates' vectors search -> gateway -> context: a lower bound of what
        // the redirect must have carried.
        long vectorBytes = 2L * QUESTIONS * SETTINGS.candidates() * SETTINGS.dim() * Float.BYTES;
        long redirected = after.bytesRedirected() - before.bytesRedirected();
        assertTrue(redirected >= vectorBytes, "redirected " + redirected + " B, the vectors alone are " + vectorBytes);
        // as a user gets it: the stages agree on co-located connections, which lend their batches
        // (by default), with the same answers
        long upgrades = ColocatedGrpc.upgrades();
        long lent = ColocatedGrpc.messagesLent();
        assertEquals(plain, answers(true));
        assertTrue(ColocatedGrpc.upgrades() > upgrades, "the stages agreed on co-located connections: "
                + ColocatedGrpc.fallbacks());
        // the query (1.5 KiB at 384 dimensions, under LEND_MIN) goes as bytes; the candidates are lent twice an
        // answer (search to gateway, gateway to context) once the stages agreed (the first calls go over HTTP/2)
        assertTrue(ColocatedGrpc.messagesLent() - lent > QUESTIONS, "lent " + (ColocatedGrpc.messagesLent() - lent)
                + " batches for " + QUESTIONS + " answers; no room " + ColocatedGrpc.lendingNoRoom());
        // and with lending off, the batches copied through the rings: the same answers, nothing lent
        lent = ColocatedGrpc.messagesLent();
        System.setProperty(ColocatedGrpc.LEND_BYTES, "0");
        try {
            assertEquals(plain, answers(true));
        } finally {
            System.clearProperty(ColocatedGrpc.LEND_BYTES);
        }
        assertEquals(0, ColocatedGrpc.messagesLent() - lent, "lent with lendBytes=0");
    }

    @Test
    void aStageRefusesGarbageWithAStatusNamingIt() throws Exception {
        try (RagService context = RagService.start(RagService.Role.CONTEXT, SETTINGS, true, 0)) {
            ManagedChannel ch = RagService.channel(context.port(), true);
            try {
                StatusRuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                        () -> io.grpc.stub.ClientCalls.blockingUnaryCall(ch, RagMethods.ASSEMBLE.toBuilder(
                                        SockmapGrpc.bytesMarshaller(), SockmapGrpc.bytesMarshaller()).build(),
                                io.grpc.CallOptions.DEFAULT, new byte[] {1, 2, 3}));
                assertEquals(io.grpc.Status.Code.INVALID_ARGUMENT, e.getStatus().getCode());
                assertTrue(e.getStatus().getDescription().startsWith("rag.Context: "), e.getStatus().getDescription());
            } finally {
                ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        }
    }

    private static List<String> answers(boolean fast) throws Exception {
        List<RagService> stages = new ArrayList<>();
        try {
            RagService embed = RagService.start(RagService.Role.EMBEDDING, SETTINGS, fast, 0);
            stages.add(embed);
            RagService search = RagService.start(RagService.Role.SEARCH, SETTINGS, fast, 0);
            stages.add(search);
            RagService context = RagService.start(RagService.Role.CONTEXT, SETTINGS, fast, 0);
            stages.add(context);
            RagService gateway = RagService.start(RagService.Role.GATEWAY, SETTINGS, fast, 0,
                    embed.port(), search.port(), context.port());
            stages.add(0, gateway);
            ManagedChannel ch = RagService.channel(gateway.port(), false);
            try {
                LoadGenerator load = new LoadGenerator(ch, SETTINGS.seed());
                List<String> out = new ArrayList<>();
                for (int i = 0; i < QUESTIONS; i++) {
                    out.add(load.ask(Corpus.question(11, i)));
                }
                return out;
            } finally {
                ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        } finally {
            stages.forEach(RagService::close);
        }
    }
}
