package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/**
 * The static factories over the global fast path and their instance forms take the same arguments
 * and check them alike (pure code: no channel is made, no root needed).
 */
class SockmapNettyFormsTest {
    @Test
    void aBoundOfZeroIsEachReceiversOwnInBothForms() {
        assertNotNull(SockmapNetty.serverChannelFactory(0));
        assertNotNull(SockmapNetty.global().serverChannels(0));
    }

    @Test
    void aNegativeBoundIsRefusedAlikeInBothForms() {
        String staticForm = assertThrows(IllegalArgumentException.class,
                () -> SockmapNetty.serverChannelFactory(-1)).getMessage();
        String instanceForm = assertThrows(IllegalArgumentException.class,
                () -> SockmapNetty.global().serverChannels(-1)).getMessage();
        assertEquals(staticForm, instanceForm);
    }
}
