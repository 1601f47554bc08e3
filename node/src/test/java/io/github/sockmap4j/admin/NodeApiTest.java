package io.github.sockmap4j.admin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.ExportedSignatures;
import io.github.sockmap4j.xdp.XdpFilter;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The node module's exported packages name no type of core's internal packages or of the linux
 * module in a public or protected signature: operators' tools build on them with core's API alone.
 */
class NodeApiTest {
    @Test
    void noExportedSignatureNamesAnInternalType() throws Exception {
        String[] exported = {"io.github.sockmap4j.admin", "io.github.sockmap4j.xdp"};
        assertTrue(ExportedSignatures.classes(SockmapAdmin.class, exported).contains(XdpFilter.class),
                "found the exported classes");
        assertEquals(List.of(), ExportedSignatures.leaks(SockmapAdmin.class, exported));
    }
}
