package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.bpf.ServiceMap;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.net.Cidr;
import io.github.sockmap4j.linux.sys.NetnsCookie;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Who put each Service the agent's control socket put in the Service map: only they, or root,
 * replace or remove it. Kept in a root-only file next to the locks ({@code agent-services}, one
 * {@code UID NETNS VIP PORT SERVICE} a line (NETNS the key's namespace cookie, 0 for a VIP that is not loopback), SERVICE as {@link AgentRequest#describe} writes it, rewritten whole at
 * each change: Services are few next to rules), so the next agent adopts it. A Service is known by
 * its {@link ServiceMap.Key}: its VIP and port, and for a loopback VIP the network namespace it was
 * put from (127.0.0.2 of one namespace is not that of another: two users may each put their own).
 * A user owns a Service only while the map holds the very Service it put: one the map holds and the file does not, or
 * holds otherwise (put by root without an agent, by the Kubernetes feed, or after an agent died
 * between its file and its map write), is root's.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class ServiceBook {
    private final ServiceMap map;
    private final Path file;
    /** The owner's uid of each Service in the map, by where it is. */
    private final Map<ServiceMap.Key, Integer> owners = new LinkedHashMap<>();
    /** What each user's Service was when it put it ({@link AgentRequest#describe}): it owns only that. */
    private final Map<ServiceMap.Key, String> put = new LinkedHashMap<>();

    private ServiceBook(ServiceMap map, Path file) {
        this.map = map;
        this.file = file;
    }

    /** Adopts the Services of {@code map}, with their owners from {@code file} when there is one. */
    public static ServiceBook load(ServiceMap map, Path file) throws IOException {
        ServiceBook b = new ServiceBook(map, file);
        if (Files.exists(file)) {
            java.util.List<String> unread = new java.util.ArrayList<>();
            String why = null;
            for (String line : Files.readAllLines(file)) {
                String[] f = line.split("\t");
                try {
                    if (f.length != 5) {
                        throw new IllegalArgumentException("not 5 fields");
                    }
                    ServiceMap.Key at = new ServiceMap.Key(Long.parseLong(f[1]),
                            new InetSocketAddress(Cidr.literal(f[2]), Integer.parseInt(f[3])));
                    int owner = Integer.parseInt(f[0]);
                    b.owners.put(at, owner);
                    b.put.put(at, f[4]);
                } catch (IllegalArgumentException e) {
                    if (!line.isBlank()) {
                        unread.add(line);
                        why = why != null ? why : e.getMessage();
                    }
                }
            }
            RuleJournal.setAside(file, unread, why);
        }
        b.sync();
        b.save();
        return b;
    }

    /**
     * Puts {@code s} for {@code uid} (already checked against the policy file), refusing to
     * replace another user's or to go past {@code quota} Services. A user's Service moves only
     * that user's connects, root's every connect; one naming a loopback address only those in the
     * network namespace of {@code pid}, the caller, and a loopback VIP is that namespace's only:
     * another namespace's Service of the same VIP is another's. Whoever puts a Service owns it from then on
     * (root replacing a user's makes it root's). The owner is on file before the map changes: an
     * agent killed in between leaves at worst an owner for a Service the map does not hold, which
     * the next agent drops.
     */
    public synchronized String put(int uid, long pid, ServiceMap.Service s, int quota)
            throws RuleBook.Refused, IOException {
        sync();
        ServiceMap.Scope scope;
        try {
            scope = ServiceMap.Scope.of(uid, s, ServiceMap.namespaceLocal(s) ? NetnsCookie.ofProcess(pid) : 0);
        } catch (IOException e) {
            throw new RuleBook.Refused("the Service " + AgentRequest.show(s.vip()) + " names a loopback address, "
                    + "which is one namespace's: " + e.getMessage());
        }
        ServiceMap.Key at = ServiceMap.Key.of(s.vip(), scope.netns());
        Integer owner = owners.get(at);
        if (owner != null && owner != uid && uid != 0) {
            throw new RuleBook.Refused("the Service " + AgentRequest.show(s.vip()) + " was put by uid " + owner
                    + ": only they, or root, may replace it");
        }
        if (owner == null && uid != 0) {
            long held = owners.values().stream().filter(o -> o == uid).count();
            if (held >= quota) {
                throw new RuleBook.Refused("uid " + uid + " has put " + held + " Services, its quota: remove one it no "
                        + "longer needs, or ask root to raise its quota (a 'quota uid " + uid + " N' line in the "
                        + "agent's policy file)");
            }
        }
        String before = put.get(at);
        owners.put(at, uid);
        put.put(at, AgentRequest.describe(s));
        save();
        try {
            map.put(s, scope);
        } catch (IOException | RuntimeException e) {
            if (owner == null) {
                owners.remove(at);
                put.remove(at);
            } else {
                owners.put(at, owner);
                put.put(at, before);
            }
            save();
            throw e;
        }
        return "service " + AgentRequest.show(s.vip()) + ": " + s.local().size() + " local, " + s.remote().size()
                + " remote endpoint(s)" + (s.localOnly() ? ", local only" : "")
                + (uid != 0 ? ", for uid " + uid + "'s connects" : "")
                + (scope.netns() != 0 ? ", in the caller's network namespace" : "");
    }

    /**
     * Removes the Service of {@code vip} (a loopback VIP: of the network namespace of {@code pid},
     * the caller) if {@code uid} put it, or is root.
     */
    public synchronized String remove(int uid, long pid, InetSocketAddress vip) throws RuleBook.Refused, IOException {
        sync();
        ServiceMap.Key at;
        try {
            at = ServiceMap.Key.of(vip, vip.getAddress().isLoopbackAddress() ? NetnsCookie.ofProcess(pid) : 0);
        } catch (IOException e) {
            throw new RuleBook.Refused("the Service " + AgentRequest.show(vip) + " is a loopback one, which is one "
                    + "namespace's: " + e.getMessage());
        }
        Integer owner = owners.get(at);
        if (owner == null) {
            throw new RuleBook.Refused("no Service " + AgentRequest.show(vip) + " (nothing to remove)");
        }
        if (owner != uid && uid != 0) {
            throw new RuleBook.Refused("the Service " + AgentRequest.show(vip) + " was put by uid " + owner
                    + ": only they, or root, may remove it");
        }
        // Off file first: an agent killed in between leaves a Service without a user owner (root's).
        owners.remove(at);
        put.remove(at);
        save();
        map.remove(at);
        return "removed service " + AgentRequest.show(vip);
    }

    /**
     * Puts {@code s} as root does, for every connect (the Kubernetes feed's Services): replaces
     * whatever the map held at its place, which is root's from then on. No walk of the map (a
     * feed puts thousands): a user's Service it replaces loses its owner line here, and anything
     * else others did is followed at the next user's request, as always.
     */
    public synchronized void putForEveryone(ServiceMap.Service s) throws IOException {
        ServiceMap.Scope scope = ServiceMap.Scope.of(0, s, ServiceMap.namespaceLocal(s) ? NetnsCookie.here() : 0);
        ServiceMap.Key at = ServiceMap.Key.of(s.vip(), scope.netns());
        owners.put(at, 0);
        if (put.remove(at) != null) {
            save(); // off file before the map changes, as root's put through the socket
        }
        map.put(s, scope);
    }

    /** Removes the Service of {@code vip} (a loopback one: of the agent's namespace) as root does; whether there was one. */
    public synchronized boolean removeForEveryone(InetSocketAddress vip) throws IOException {
        ServiceMap.Key at = ServiceMap.Key.of(vip, vip.getAddress().isLoopbackAddress() ? NetnsCookie.here() : 0);
        owners.remove(at);
        if (put.remove(at) != null) {
            save();
        }
        return map.remove(at);
    }

    /** Every Service in the map, of every namespace. */
    public synchronized List<ServiceMap.Service> list() throws IOException {
        return map.list();
    }

    /** Each Service, its endpoints and who put it. */
    public synchronized List<String> describeAll() throws IOException {
        return describeFor(0);
    }

    /** What {@code uid} may see: root every Service, another user those it put. */
    public synchronized List<String> describeFor(int uid) throws IOException {
        sync();
        List<String> out = new ArrayList<>();
        for (ServiceMap.Entry e : map.entries()) {
            int owner = owners.getOrDefault(e.key(), 0);
            if (uid == 0 || owner == uid) {
                out.add(AgentRequest.describe(e.service())
                        + (e.key().netns() != 0 ? " of network namespace " + e.key().netns() : "")
                        + " put by uid " + owner + (owner != 0 ? " (moves its connects only)" : ""));
            }
        }
        return out;
    }

    /**
     * Follows what others did to the map (the Kubernetes feed, root writing it directly): a
     * Service no longer in the map has no owner, and one the map holds otherwise than its user put
     * it is root's.
     */
    private void sync() throws IOException {
        Map<ServiceMap.Key, Integer> now = new LinkedHashMap<>();
        Map<ServiceMap.Key, String> nowPut = new LinkedHashMap<>();
        for (ServiceMap.Entry e : map.entries()) {
            String what = AgentRequest.describe(e.service());
            if (what.equals(put.get(e.key()))) {
                now.put(e.key(), owners.getOrDefault(e.key(), 0));
                nowPut.put(e.key(), what);
            } else {
                now.put(e.key(), 0);
            }
        }
        if (!now.equals(owners) || !nowPut.equals(put)) {
            owners.clear();
            owners.putAll(now);
            put.clear();
            put.putAll(nowPut);
            save();
        }
    }

    private void save() throws IOException {
        StringBuilder sb = new StringBuilder();
        owners.forEach((at, uid) -> {
            if (uid != 0 && put.containsKey(at)) {
                sb.append(uid).append('\t').append(at.netns()).append('\t').append(Cidr.text(at.vip().getAddress()))
                        .append('\t').append(at.vip().getPort()).append('\t').append(put.get(at)).append('\n');
            }
        });
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        Files.deleteIfExists(tmp);
        Files.writeString(Files.createFile(tmp, PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rw-------"))), sb);
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /** How many Services the map holds. */
    public synchronized int size() {
        return owners.size();
    }
}
