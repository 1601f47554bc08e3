package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.linux.bpf.MeshMap;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;

/**
 * The ports a meshed pod's NAT leaves out of its inbound redirect, as the agent takes them
 * (--mesh-skip-inbound-ports) and as the kernel's map can hold them: what does not fit is refused
 * with its reason before anything is loaded. Needs no privilege.
 */
class MeshOptionsTest {
    @ParameterizedTest
    @ValueSource(strings = {"1,2,3,4,5,6,7,8,9", "15006", "15020,15020", "http", "0", "70000"})
    void skipPortsTheKernelCannotTakeAreRefusedByName(String ports) {
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new AgentMain());
        cl.setErr(new PrintWriter(err, true));
        cl.setOut(new PrintWriter(new StringWriter(), true));
        int code = cl.execute("--pin-dir", "/nonexistent/sockmap4j-options", "agent", "--cgroup", "/nonexistent",
                "--kubernetes", "--node-name", "node-1", "--mesh", "--mesh-skip-inbound-ports", ports);
        assertEquals(CommandLine.ExitCode.USAGE, code, err.toString());
        assertTrue(err.toString().contains("--mesh-skip-inbound-ports takes up to 8"), err.toString());
    }

    @Test
    void aPodKeepsItsSkipPortsInOrder() {
        List<Integer> ports = List.of(15090, 15008, 15021, 15020);
        SockmapAdmin.MeshedPod pod = new SockmapAdmin.MeshedPod(7, 1337, 1337, 15001, 15006,
                List.of(InetAddress.ofLiteral("10.244.1.2")), List.of(5432), ports);
        assertEquals(ports, pod.inboundSkip());
        assertEquals(List.of(5432), pod.outboundSkip());
        assertEquals(8, MeshMap.SKIP_PORTS, "what the kernel's struct holds");
    }
}
