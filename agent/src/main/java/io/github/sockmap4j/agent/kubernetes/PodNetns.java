package io.github.sockmap4j.agent.kubernetes;

import io.github.sockmap4j.linux.sys.NetNamespace;
import java.io.IOException;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Which network namespace is a meshed pod's: the one its sandbox was given, as its processes
 * (those in its cgroups, {@link PodCgroups}) agree on it. A namespace counts only where it was made
 * in the node's user namespace (the agent's own), or, for a pod with user namespaces
 * ({@code spec.hostUsers: false}), in a user namespace root made directly below it (the runtime's):
 * a namespace a process made for itself ({@code unshare -Urn}, which any user may) is owned by the
 * user namespace that process made, and never counts, whatever addresses it holds. The node's own
 * namespace never counts. Two namespaces that count, in one pod, and the agent cannot tell which is
 * the pod's: the pod is left to its NAT. The one left must hold every address of the pod.
 *
 * <p><b>Note:</b> threadsafe (no state); each call opens and closes its own descriptors.
 */
final class PodNetns {
    private PodNetns() {
    }

    /** What a search found. */
    sealed interface Result permits Found, NotYet, CannotTell {
        /** Why it is not {@link Found}, for the agent's log; null for {@link Found}. */
        String why();
    }

    /** The pod's namespace: its identity ({@code net:[inode]}) and cookie. */
    record Found(String id, long cookie) implements Result {
        @Override
        public String why() {
            return null;
        }
    }

    /** Not there yet (no process, or not one in a namespace that counts, or its addresses not given yet). */
    record NotYet(String why) implements Result {
    }

    /** Its processes disagree: the pod is left to its NAT until they agree. */
    record CannotTell(String why) implements Result {
    }

    /**
     * The namespace of the pod whose processes are {@code pids} and addresses {@code addresses}.
     *
     * @param hostUsers whether the pod runs in the node's user namespace ({@code spec.hostUsers},
     *                  true unless false)
     * @param node      the agent's own network namespace's identity (the node's)
     * @param ours      the agent's own user namespace's identity (the node's initial one)
     */
    static Result find(List<Long> pids, Collection<InetAddress> addresses, boolean hostUsers, String node, String ours) {
        if (pids.isEmpty()) {
            return new NotYet("no process in its cgroup yet");
        }
        Map<String, NetNamespace> counted = new LinkedHashMap<>();
        int inNode = 0;
        int madeByAProcess = 0;
        try {
            for (long pid : pids) {
                NetNamespace ns;
                try {
                    ns = NetNamespace.ofProcess(pid);
                } catch (IOException e) {
                    continue; // exited meanwhile
                }
                boolean keep = false;
                try {
                    if (ns.id().equals(node)) {
                        inNode++;
                    } else if (!counted.containsKey(ns.id())) {
                        if (counts(ns.owner(), hostUsers, ours)) {
                            counted.put(ns.id(), ns);
                            keep = true;
                        } else {
                            madeByAProcess++;
                        }
                    }
                } catch (IOException e) {
                    madeByAProcess++; // its owner cannot be read: it does not count
                } finally {
                    if (!keep) {
                        ns.close();
                    }
                }
            }
            if (counted.isEmpty()) {
                return new NotYet(inNode + " of its processes in the node's network namespace, " + madeByAProcess
                        + " in namespaces not made " + (hostUsers ? "in the node's user namespace" : "by its runtime"));
            }
            if (counted.size() > 1) {
                return new CannotTell("its processes are in " + counted.size() + " network namespaces "
                        + (hostUsers ? "of the node's user namespace" : "its runtime could have made") + " "
                        + new ArrayList<>(counted.keySet()) + ", and only its sandbox's is the pod's");
            }
            NetNamespace ns = counted.values().iterator().next();
            try {
                if (!ns.holdsAll(addresses)) {
                    return new NotYet("its network namespace " + ns.id() + " does not hold all of its addresses "
                            + addresses.stream().map(InetAddress::getHostAddress).toList() + " yet");
                }
                return new Found(ns.id(), ns.cookie());
            } catch (IOException e) {
                return new NotYet("its network namespace " + ns.id() + " could not be looked into: " + e.getMessage());
            }
        } finally {
            counted.values().forEach(NetNamespace::close);
        }
    }

    /**
     * Whether a namespace owned as {@code owner} says counts: made in the node's user namespace;
     * for a pod with user namespaces, also in one root made directly below it (its runtime's).
     */
    static boolean counts(NetNamespace.Owner owner, boolean hostUsers, String ours) {
        if (owner.userns().equals(ours)) {
            return true;
        }
        return !hostUsers && ours.equals(owner.parent()) && owner.ownerUid() == 0;
    }
}
