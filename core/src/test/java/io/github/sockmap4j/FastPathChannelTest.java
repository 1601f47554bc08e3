package io.github.sockmap4j;

/** The channel suite over the fast path: fails, never skips, when the fast path is missing. */
class FastPathChannelTest extends ChannelContractTest {
    @Override
    boolean fastPath() {
        return true;
    }
}
