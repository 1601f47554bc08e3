package io.github.sockmap4j.netty.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * {@link GrpcFastPathTest}'s calls in the {@link SockmapGrpc.Profile#POLLING} profile: event loops
 * that poll before they sleep, gRPC's executor.
 */
class GrpcPollingProfileTest extends GrpcFastPathTest {
    @Override
    SockmapGrpc.Profile profile() {
        return SockmapGrpc.Profile.POLLING;
    }

    @Test
    void eachProfileHasOneGroupSharedByItsBuilders() {
        assertSame(SockmapGrpc.sharedGroup(), SockmapGrpc.group(SockmapGrpc.Profile.STANDARD));
        assertSame(SockmapGrpc.group(SockmapGrpc.Profile.POLLING), SockmapGrpc.group(SockmapGrpc.Profile.POLLING));
        assertNotSame(SockmapGrpc.group(SockmapGrpc.Profile.POLLING), SockmapGrpc.group(SockmapGrpc.Profile.DIRECT));
        assertEquals(Duration.ZERO, SockmapGrpc.Profile.STANDARD.maxPoll());
        assertThrows(NullPointerException.class, () -> SockmapGrpc.group(null));
    }
}
