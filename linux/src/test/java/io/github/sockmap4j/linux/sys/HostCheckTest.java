package io.github.sockmap4j.linux.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The refusal's recipe names the host's own cgroup v2 mount, wherever it is (no root). */
class HostCheckTest {
    @Test
    void theRecipeUsesTheMountItIsGiven() {
        assertEquals("'mkdir /sys/fs/cgroup/svc; echo PID > /sys/fs/cgroup/svc/cgroup.procs'",
                HostCheck.childRecipe(Path.of("/sys/fs/cgroup")));
        assertEquals("'mkdir /sys/fs/cgroup/unified/svc; echo PID > /sys/fs/cgroup/unified/svc/cgroup.procs'",
                HostCheck.childRecipe(Path.of("/sys/fs/cgroup/unified")));
    }
}
