package io.github.sockmap4j.linux.ffi;

import static io.github.sockmap4j.linux.ffi.Native.C_INT;
import static io.github.sockmap4j.linux.ffi.Native.C_PTR;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Which programs a cgroup runs ({@code bpf_prog_query}) and who they are ({@code struct
 * bpf_prog_info}'s id and name): to tell another program that uses sockmaps on the same sockets.
 * Linked on first use: most processes never ask.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class ProgQuery {
    /** bpf_prog_query's flag: every program that runs for the cgroup, its ancestors' too. */
    public static final int BPF_F_QUERY_EFFECTIVE = 1;

    /** struct bpf_prog_info, up to name. */
    private static final StructLayout PROG_INFO = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("type"),
            ValueLayout.JAVA_INT.withName("id"),
            MemoryLayout.paddingLayout(56),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("name")).withName("bpf_prog_info");
    private static final long INFO_ID = PROG_INFO.byteOffset(MemoryLayout.PathElement.groupElement("id"));
    private static final long INFO_NAME = PROG_INFO.byteOffset(MemoryLayout.PathElement.groupElement("name"));

    /** A program: its kernel id and its name (cut at 15 characters by the kernel). */
    public record Program(int id, String name) {
    }

    private final MethodHandle progQuery;
    private final MethodHandle progGetFdById;
    private final MethodHandle objGetInfo;

    public ProgQuery(Libbpf bpf) {
        progQuery = Native.plain(bpf.symbols(), "bpf_prog_query",
                FunctionDescriptor.of(C_INT, C_INT, C_INT, C_INT, C_PTR, C_PTR, C_PTR));
        progGetFdById = Native.plain(bpf.symbols(), "bpf_prog_get_fd_by_id", FunctionDescriptor.of(C_INT, C_INT));
        objGetInfo = Native.plain(bpf.symbols(), "bpf_obj_get_info_by_fd",
                FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR));
    }

    /** The ids of the programs of {@code attachType} on the cgroup open as {@code cgroupFd}. */
    public List<Integer> attached(int cgroupFd, int attachType, int flags) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            for (int room = 64; ; room *= 4) {
                MemorySegment ids = arena.allocate(ValueLayout.JAVA_INT, room);
                MemorySegment count = arena.allocateFrom(ValueLayout.JAVA_INT, room);
                int r = (int) progQuery.invokeExact(cgroupFd, attachType, flags, MemorySegment.NULL, ids, count);
                if (r == -Errno.ENOSPC) {
                    continue;
                }
                if (r < 0) {
                    throw Errno.error("bpf_prog_query", r);
                }
                List<Integer> out = new ArrayList<>();
                for (int i = 0; i < count.get(ValueLayout.JAVA_INT, 0); i++) {
                    out.add(ids.getAtIndex(ValueLayout.JAVA_INT, i));
                }
                return out;
            }
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** The program of {@code id}; null when it is gone. */
    public Program program(int id) throws NativeIOException {
        int fd;
        try {
            fd = (int) progGetFdById.invokeExact(id);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        if (fd == -Errno.ENOENT) {
            return null;
        }
        if (fd < 0) {
            throw Errno.error("bpf_prog_get_fd_by_id", fd, Integer.toString(id));
        }
        try {
            return program(fd, id);
        } finally {
            LibC.close(fd);
        }
    }

    /** The program open as {@code fd} (a pin of ours, say). */
    public Program ofFd(int fd) throws NativeIOException {
        return program(fd, -1);
    }

    private Program program(int fd, int id) throws NativeIOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment info = arena.allocate(PROG_INFO);
            MemorySegment len = arena.allocateFrom(ValueLayout.JAVA_INT, (int) info.byteSize());
            int r = (int) objGetInfo.invokeExact(fd, info, len);
            if (r < 0) {
                throw Errno.error("bpf_obj_get_info_by_fd", r, id < 0 ? "fd " + fd : "program " + id);
            }
            byte[] name = info.asSlice(INFO_NAME, 16).toArray(ValueLayout.JAVA_BYTE);
            int end = 0;
            while (end < name.length && name[end] != 0) {
                end++;
            }
            return new Program(info.get(ValueLayout.JAVA_INT, INFO_ID), new String(name, 0, end, StandardCharsets.UTF_8));
        } catch (NativeIOException e) {
            throw e;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }
}
