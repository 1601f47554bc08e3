package io.github.sockmap4j.reactor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.netty.SockmapNetty;
import io.netty.channel.socket.DatagramChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.embedded.EmbeddedChannel;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** What needs no kernel: arguments, the channel types it makes and refuses, the loops' life. */
class SockmapLoopResourcesTest {
    @Test
    void badArgumentsAreRefusedByName() {
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> SockmapLoopResources.create(SockmapNetty.global(), "", 1, true, 0)).getMessage().contains("prefix"));
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> SockmapLoopResources.create(SockmapNetty.global(), "x", 0, true, 0)).getMessage().contains("workers=0"));
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> SockmapLoopResources.create(SockmapNetty.global(), "x", 1, true, -1)).getMessage()
                .contains("inFlightBoundBytes=-1"));
    }

    @Test
    void aPollingWindowOutOfRangeIsRefusedWithItsLimit() {
        SockmapLoopResources loops = SockmapLoopResources.create(SockmapNetty.global(), "t", 1, true, 0);
        assertTrue(assertThrows(IllegalArgumentException.class, () -> loops.polling(Duration.ofMillis(2))).getMessage()
                .contains("between 0 and"));
        assertThrows(IllegalArgumentException.class, () -> loops.polling(Duration.ofNanos(-1)));
        assertThrows(NullPointerException.class, () -> loops.polling(null));
        assertEquals(Duration.ZERO, loops.maxPoll(), "sleeping loops unless asked");
        assertEquals(Duration.ofNanos(200_000), loops.polling(Duration.ofNanos(200_000)).maxPoll());
    }

    @Test
    void aChannelTypeItDoesNotMakeIsNamed() {
        SockmapLoopResources loops = SockmapLoopResources.create(SockmapNetty.global(), "t", 1, true, 0);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> loops.onChannel(EmbeddedChannel.class, null));
        assertTrue(e.getMessage().contains(EmbeddedChannel.class.getName()), e.getMessage());
    }

    @Test
    void channelClassesAreOfTheLoopsKind() {
        SockmapLoopResources loops = SockmapLoopResources.create(SockmapNetty.global(), "t", 1, true, 0);
        assertEquals(SockmapNetty.socketChannelClass(), loops.onChannelClass(SocketChannel.class, null));
        assertEquals(SockmapNetty.isEpollAvailable() ? "EpollDatagramChannel" : "NioDatagramChannel",
                loops.onChannelClass(DatagramChannel.class, null).getSimpleName());
    }

    @Test
    void loopsStartOnUseEndOnDisposeAndStartAgain() {
        SockmapLoopResources loops = SockmapLoopResources.create(SockmapNetty.global(), "t", 1, true, 0);
        assertTrue(loops.isDisposed(), "nothing started yet");
        var first = loops.onServer(true);
        loops.disposeLater(Duration.ZERO, Duration.ofSeconds(10)).block();
        assertTrue(first.isTerminated() && loops.isDisposed());
        var second = loops.onClient(true);
        assertTrue(second != first && !second.isShuttingDown(), "a new group after a dispose");
        loops.disposeLater(Duration.ZERO, Duration.ofSeconds(10)).block();
        assertTrue(second.isTerminated());
    }
}
