"""What an async-profiler collapsed stack passes through: shared by profile-demo.sh and profile-grpc.sh.

GROUPS: (name, pattern) pairs; a sample counts once in each group one of its frames matches.
'sockmap4j' has no pattern: it counts samples whose innermost Java frame is sockmap4j's own
(what its code costs itself, not what runs below its handlers), outside the package given.
"""
import re

GROUPS = [('sockmap4j', None),
          ('k:sockmap', r'^(tcp_bpf|sk_msg|sk_psock|bpf_prog|__sk_msg|bpf_msg|sock_map|bpf_tcp|sock_hash)'),
          ('k:tcp/ip', r'^(ip_|__ip_|ipt_|nf_|nft_|veth_|__netif|net_rx|napi|__dev_queue|dev_hard|loopback_xmit|ip6_'
                       r'|__ip6|netif_receive|tcp_v4_rcv|tcp_v6_rcv|tcp_rcv|tcp_ack|tcp_transmit|__tcp_transmit'
                       r'|tcp_write_xmit|__tcp_push|do_softirq|__do_softirq|__local_bh_enable)'),
          ('k:unix', r'^(unix_stream|unix_|__unix)'),
          ('sendmsg', r'^(tcp_sendmsg|sock_sendmsg|__sys_sendmsg|sock_write_iter|__x64_sys_write|__x64_sys_writev'
                      r'|do_writev|unix_stream_sendmsg)'),
          ('recvmsg', r'^(tcp_recvmsg|sock_recvmsg|__sys_recvmsg|sock_read_iter|__x64_sys_read|tcp_bpf_recvmsg'
                      r'|unix_stream_recvmsg)'),
          ('epoll_wait', r'^(do_epoll_wait|ep_poll)'), ('wake-ups', r'^try_to_wake_up'),
          ('futex', r'^(futex_|__x64_sys_futex)'), ('http2', r'io/netty/handler/codec/http2'), ('grpc', r'^io/grpc'),
          ('arrow', r'org/apache/arrow')]


def count(frames, n, into, not_ours):
    """Adds a sample of weight n whose frames (innermost last) are given to the groups it passes through."""
    java = [fr for fr in frames if '/' in fr]
    if java and re.search(r'io/github/sockmap4j/(?!' + not_ours + ')', java[-1]):
        into['sockmap4j'] += n
    seen = set()
    for fr in frames:
        for name, pat in GROUPS:
            if pat and name not in seen and re.search(pat, fr):
                seen.add(name)
                into[name] += n
