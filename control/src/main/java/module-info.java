/**
 * The node agent's control socket as both of its ends read it: the one-line request format
 * ({@code AgentRequest}), its limits and the socket's path, and the client ({@code AgentClient},
 * the rules it holds: {@code AgentRule}). Core (a service's opt-in through the agent), node
 * ({@code PolicyClient}, {@code SockmapAdmin}) and the agent (the server) require it.
 *
 * <p>Not an API: its package is exported to those three modules only. They are built after this
 * module, so javac does not see them here: hence "module".
 */
@SuppressWarnings("module")
module io.github.sockmap4j.control {
    requires io.github.sockmap4j.linux;

    exports io.github.sockmap4j.control to io.github.sockmap4j.core, io.github.sockmap4j.node, io.github.sockmap4j.agent;
}
