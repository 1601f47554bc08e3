package io.github.sockmap4j;

import java.nio.channels.SelectionKey;
import java.util.AbstractSet;
import java.util.Iterator;
import java.util.Set;

/** The selected-key set: callers may remove keys, never add them (Selector's contract). */
final class RemoveOnlySet extends AbstractSet<SelectionKey> {
    private final Set<SelectionKey> backing;

    RemoveOnlySet(Set<SelectionKey> backing) {
        this.backing = backing;
    }

    @Override
    public Iterator<SelectionKey> iterator() {
        return backing.iterator();
    }

    @Override
    public int size() {
        return backing.size();
    }

    @Override
    public boolean remove(Object o) {
        return backing.remove(o);
    }

    @Override
    public boolean contains(Object o) {
        return backing.contains(o);
    }

    @Override
    public void clear() {
        backing.clear();
    }

    @Override
    public boolean add(SelectionKey k) {
        throw new UnsupportedOperationException("keys cannot be added to the selected-key set");
    }
}
