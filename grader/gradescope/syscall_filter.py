"""The system-call filter a sandboxed child loads on a host without namespaces (the fallback of
isolation.py): no network sockets, no way into another process (ptrace, process_vm_*), no new
namespaces, mounts, keys, BPF or kernel modules. Everything else is allowed, so an honest
kernel runs as it would anywhere. Loaded through pyseccomp (libseccomp), after the child has
dropped to its own uid and set no_new_privs; runs in the child (sandbox.enter), so it imports
only pyseccomp."""
from __future__ import annotations

import errno

AF_UNIX = 1
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "unshare", "setns", "mount", "umount2",
          "pivot_root", "chroot", "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
          "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "io_uring_setup",
          "open_by_handle_at", "name_to_handle_at", "fanotify_init", "acct", "swapon", "swapoff", "reboot")


def build():
    """The filter, not yet loaded."""
    import pyseccomp as seccomp
    deny = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    # sockets of any family but AF_UNIX: no network, and no netlink view of the host
    rules.add_rule(deny, "socket", seccomp.Arg(0, seccomp.NE, AF_UNIX))
    for name in DENIED:
        try:
            rules.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):
            pass          # a call this architecture or kernel does not have
    return rules


def install() -> None:
    build().load()
