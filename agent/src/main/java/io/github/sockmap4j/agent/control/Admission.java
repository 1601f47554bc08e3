package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.net.UnixListener;
import io.github.sockmap4j.linux.sys.UserNamespaces;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntUnaryOperator;

/**
 * Which connections the control socket serves ({@link ControlServer.Limits}): per process, per
 * user's share and for all users but root together, counted at admission under the uid and pid
 * the kernel gave the connection when it connected, and given back at its close. The last
 * {@code reserve} connections of all users' are kept for shares that hold fewer than a process's
 * limit: users who hold everything they may leave room for users who hold (almost) nothing. A user's share
 * is its uid's, or for a process in a user namespace of a user other than root that user's,
 * whatever uids the namespace maps.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class Admission {
    private final ControlServer.Limits limits;
    /** The owner of a process's user namespace below the agent's, or -1 (the agent's own, gone, unknown). */
    private final IntUnaryOperator namespaceOwner;
    /** Open connections by share ({@link #shareOf}) and by pid, and of users other than root. */
    private final Map<Integer, Integer> perShare = new HashMap<>();
    private final Map<Integer, Integer> perPid = new HashMap<>();
    private int unprivileged;
    /** The share each admitted connection counts in. */
    private final Map<UnixListener.Connection, Integer> shares = new ConcurrentHashMap<>();

    Admission(ControlServer.Limits limits) {
        this(limits, UserNamespaces::ownerBelowOurs);
    }

    Admission(ControlServer.Limits limits, IntUnaryOperator namespaceOwner) {
        this.limits = limits;
        this.namespaceOwner = namespaceOwner;
    }

    /**
     * Whose share a connection of {@code uid} (pid {@code pid}) takes: root's connections are root's;
     * a process in a user namespace of a user other than root takes that user's share, whatever
     * uids the namespace maps (a user with a subordinate uid range has thousands), so that no
     * number of uids makes more than one user's share; any other process takes its uid's. A process
     * that has gone gives {@link UserNamespaces#GONE}: its connection is refused.
     */
    int shareOf(int uid, int pid) {
        if (uid == 0 || pid == 0) {
            return uid;
        }
        int owner = namespaceOwner.applyAsInt(pid);
        return owner > 0 ? owner : owner == UserNamespaces.GONE ? UserNamespaces.GONE : uid;
    }

    /**
     * Counts {@code conn} in, or says why not (then nothing is counted): its process gone before
     * it could be told whose it is, or its process, share or all users at their limit.
     *
     * @return null when admitted ({@link #release} gives it back), else the refusal
     */
    String admit(UnixListener.Connection conn) {
        int uid = conn.peer().uid();
        int pid = conn.peer().pid();
        int share = shareOf(uid, pid);
        if (share == UserNamespaces.GONE) {
            // Its uid may be one of thousands a user's namespace maps: which user's share it takes
            // cannot be told any more, and a connection handed on this way would take a share of
            // its own (Trust IV, row 4).
            return "process " + pid + " (uid " + uid + ") exited before the agent could see whose it is: connect "
                    + "from the process that makes the requests";
        }
        synchronized (perShare) {
            int mine = perShare.getOrDefault(share, 0);
            int process = perPid.getOrDefault(pid, 0);
            // pid 0: a peer in a pid namespace the agent cannot see into (an agent without hostPID); its
            // processes cannot be told apart, so only the uid's limit counts for them.
            if (uid != 0 && pid != 0 && process >= limits.connectionsPerProcess()) {
                return "process " + pid + " (uid " + uid + ") has " + process + " connections to the agent open, its "
                        + "limit: close one first";
            }
            if (uid != 0 && mine >= limits.connectionsPerUid()) {
                return (share == uid ? "uid " + uid : "uid " + uid + ", in a user namespace of uid " + share + ",")
                        + " has " + mine + " connections to the agent open" + (share == uid ? "" : " with that user's")
                        + ", its limit: close one first";
            }
            if (uid != 0 && unprivileged >= limits.connections()) {
                return "the agent serves " + unprivileged + " connections of users other than root, its limit: retry "
                        + "later";
            }
            if (uid != 0 && mine >= limits.connectionsPerProcess()
                    && unprivileged >= limits.connections() - limits.reserve()) {
                return "the agent serves " + unprivileged + " connections of users other than root; its last "
                        + limits.reserve() + " are kept for users holding fewer than " + limits.connectionsPerProcess()
                        + ", and " + (share == uid ? "uid " + uid : "uid " + uid + ", in a user namespace of uid "
                        + share + ",") + " holds " + mine + ": close one, or retry later";
            }
            perShare.put(share, mine + 1);
            perPid.put(pid, process + 1);
            unprivileged += uid != 0 ? 1 : 0;
            shares.put(conn, share);
        }
        return null;
    }

    /** Gives back what an admitted {@code conn} counted; nothing for one never admitted. */
    void release(UnixListener.Connection conn) {
        Integer share = shares.remove(conn);
        if (share == null) {
            return;
        }
        int uid = conn.peer().uid();
        synchronized (perShare) {
            perShare.merge(share, -1, (a, b) -> a + b == 0 ? null : a + b);
            perPid.merge(conn.peer().pid(), -1, (a, b) -> a + b == 0 ? null : a + b);
            unprivileged -= uid != 0 ? 1 : 0;
        }
    }
}
