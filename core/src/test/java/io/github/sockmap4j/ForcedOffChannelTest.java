package io.github.sockmap4j;

/** The same suite with the fast path forced off: plain TCP, identical bytes. */
class ForcedOffChannelTest extends ChannelContractTest {
    @Override
    boolean fastPath() {
        return false;
    }

    @Override
    SockmapConfig tweak(SockmapConfig c) {
        return c.withDisabled(true).withRequired(false);
    }
}
