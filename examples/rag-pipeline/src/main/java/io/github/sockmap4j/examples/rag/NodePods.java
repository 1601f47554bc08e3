package io.github.sockmap4j.examples.rag;

/** The node topology's layout: which pod runs what, and each stage's Service VIP and port. */
final class NodePods {
    private NodePods() {
    }

    /** The node topology: pods 0-3 the stages in Role order, pod 4 the load generator's. */
    static final int CLIENT = RagService.Role.values().length;

    /** How far above {@link #port} the fast path's stages listen when both paths run at once ({@code --paired}). */
    static final int PAIRED_OFFSET = 1000;

    /** A stage's Service VIP on the node. */
    static String vip(RagService.Role r) {
        return "10.96.0." + (10 + r.ordinal());
    }

    /** A stage's port on the node: each its own, the gateway's (ingress) apart from the internal ones. */
    static int port(RagService.Role r) {
        return r == RagService.Role.GATEWAY ? 8080 : 50051 + r.ordinal();
    }
}
