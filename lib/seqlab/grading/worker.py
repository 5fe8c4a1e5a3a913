"""The sandbox's worker: imports torch and seqlab once, then runs each exercise in a process of its own.

``python -m seqlab.grading.worker MODE CONTROL_FD`` runs inside bubblewrap (:mod:`seqlab.grading.sandbox`). It
never runs student code itself. For each order it reads from stdin it forks:

1. a short-lived process that unshares new PID, mount, IPC and network namespaces and forks
2. the exercise's *init* (PID 1 of the new namespace): it reads its job (the next frame on stdin, so the
   worker never holds a student's code or a hidden input in its own memory), mounts a fresh ``/tmp``,
   ``/dev/shm`` and ``/proc``, makes ``/dev`` read-only, joins its slot's cgroups, sets its limits, drops
   every privilege, closes every file but the result channel, and forks
3. the answer's process (:func:`seqlab.grading.child.run_job`), which reports on the result channel (stdout).

When the init ends, the kernel kills everything else in its namespace; on time, the worker SIGKILLs it. The
worker then writes ``{"returncode": ..., "timed_out": ..., "seconds": ...}`` on its control channel, which
no exercise process can reach (it is closed before any student code runs).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import select
import signal
import sys
import time

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x08000000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 4, 24, 28
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 36, 38, 47, 4
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, each with its lock
SECURE_BITS = 0b11101111
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)

libc = ctypes.CDLL(None, use_errno=True)
# What the course's notebooks import (never a student's list): imported once by the worker, so that an exercise's
# process, forked from it, finds them loaded instead of importing matplotlib and seqlab again every time.
WARM_MODULES = ("numpy", "matplotlib", "matplotlib.pyplot", "seqlab.notebook", "seqlab.data", "seqlab.nn",
                "seqlab.models", "seqlab.decoding", "seqlab.train", "seqlab.ngram", "seqlab.gradients",
                "seqlab.checkpoints", "seqlab.pretrained", "seqlab.cost", "seqlab.hmm", "seqlab.long_range",
                "seqlab.tagging", "seqlab.watch", "seqlab.stepwise", "seqlab.exercises.pieces")


class SetupFailed(Exception):
    pass


def _call(name: str, *args) -> None:
    if getattr(libc, name)(*args) != 0:
        raise SetupFailed(f"{name}{args[:2]}: {os.strerror(ctypes.get_errno())}")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: None if s is None else s.encode()   # noqa: E731
    _call("mount", encode(source), encode(target), encode(kind), ctypes.c_ulong(flags), encode(data))


def _fresh_mounts(keep: list[str]) -> None:
    """A private copy of the mounts, then a fresh /tmp, /dev/shm and /proc, and a read-only /dev. ``keep``:
    Python's or seqlab's folders that live in /tmp, bound again (read-only) into the fresh one."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    held = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for path in keep]
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777")
    for path, fd in held:
        parent = "/tmp"
        for part in os.path.relpath(path, "/tmp").split(os.sep):
            parent = os.path.join(parent, part)
            if not os.path.isdir(parent):
                os.mkdir(parent)
                os.chmod(parent, 0o755)              # the sandbox's user must pass through it
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    try:
        _mount(None, "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    except SetupFailed:
        _mount(None, "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _limit(which: int, value: int) -> None:
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):           # a hard limit already below ours: keep it
        pass


def _drop_bounding_set() -> None:
    """No capability can be gained again, by any program this process runs."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)


def _drop_capabilities() -> None:
    """Give up every capability for good: the bounding set, securebits (root gets none back), ambient ones,
    then the permitted, effective and inheritable sets."""
    _drop_bounding_set()
    _call("prctl", PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if SYS_CAPSET is None:
        raise SetupFailed(f"capset: unknown system call number on {os.uname().machine}")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)          # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()                          # two (effective, permitted, inheritable), all 0
    if libc.syscall(SYS_CAPSET, header, data) != 0:
        raise SetupFailed(f"capset: {os.strerror(ctypes.get_errno())}")


def _effective_capabilities() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return -1


def _tasks_here() -> int:
    """Tasks (threads count) in this PID namespace: the user namespace's count that RLIMIT_NPROC checks."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return count


def _exercise_init(order: dict, mode: str) -> None:
    """Step 2 of the module docstring. Never returns."""
    from seqlab.grading.sandbox import read_frame

    job = read_frame(0)                                     # this exercise's job: only this process reads it
    blank = os.open("/dev/null", os.O_RDWR)
    os.dup2(blank, 0)
    os.dup2(blank, 2)
    limits = order["limits"]
    if mode != "rlimits-only":
        _fresh_mounts(order.get("keep", []))
        for fd in order.get("cgroup_fds", []):
            os.write(fd, b"0")                               # "0": this process (children inherit it)
    os.closerange(3, 1 << 16)
    _limit(resource.RLIMIT_AS, limits["memory"])
    _limit(resource.RLIMIT_CPU, int(limits["seconds"]) + 10)  # a C loop that ignores signals still stops
    _limit(resource.RLIMIT_FSIZE, limits["file"])
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_NOFILE, 256)
    if mode == "bwrap+uid":
        uid = order["uid"]
        _drop_bounding_set()
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)                         # from root to a user id: every capability goes
        _limit(resource.RLIMIT_NPROC, limits["processes"])   # counted for this user id: only this exercise
        if os.getuid() != uid or os.geteuid() != uid:
            raise SetupFailed("the user id did not change")
    elif mode == "bwrap-userns":
        _limit(resource.RLIMIT_NPROC, order["tasks"] + 2 + limits["processes"])
        _drop_capabilities()
    elif os.getuid() != 0:
        _limit(resource.RLIMIT_NPROC, _tasks_here() + limits["processes"])
    _call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if mode != "rlimits-only" and _effective_capabilities() != 0:
        raise SetupFailed("capabilities remain")
    if mode == "rlimits-only":
        os.setsid()
    answer = os.fork()
    if answer == 0:
        from seqlab.grading import child
        try:
            child.run_job(job)
        finally:
            os._exit(0)
    while True:                                             # PID 1: reap, and leave with the answer's status
        pid, status = os.wait()
        if pid == answer:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else min(code, 127))


def _run_one(order: dict, mode: str) -> dict:
    """Fork the exercise (steps 1-3), wait for it within its time limit, and say how it ended."""
    start = time.monotonic()
    read_end, write_end = os.pipe()
    tasks = _tasks_here() if mode == "bwrap-userns" else 0
    first = os.fork()
    if first == 0:
        code = 120
        try:
            os.close(read_end)
            if mode != "rlimits-only":
                _call("unshare", CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET)
            init = os.fork()
            if init:
                os.write(write_end, str(init).encode())
                code = 0
            else:
                os.close(write_end)
                try:
                    _exercise_init({**order, "tasks": tasks}, mode)
                except BaseException as err:                # noqa: BLE001: said on the result channel
                    message = {"event": "setup_failed", "error": f"{type(err).__name__}: {err}"[:300]}
                    os.write(1, (json.dumps(message) + "\n").encode())
                    code = 122
        except BaseException:                               # noqa: BLE001: report by exit code, never a trace
            code = 121
        os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(first, 0)
    data = os.read(read_end, 64)
    os.close(read_end)
    if not data:
        return {"error": f"the exercise's process could not be started (exit {os.waitstatus_to_exitcode(status)})"}
    init = int(data)
    timed_out = False
    pidfd = os.pidfd_open(init)
    try:
        left = order["limits"]["seconds"] - (time.monotonic() - start)
        if not select.select([pidfd], [], [], max(left, 0))[0]:
            timed_out = True
            os.kill(init, signal.SIGKILL)
            if mode == "rlimits-only":
                try:
                    os.killpg(init, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        os.close(pidfd)
    _, status = os.waitpid(init, 0)
    code = os.waitstatus_to_exitcode(status)
    if code >= 128:
        code = 128 - code                                   # the answer died of signal n: -n
    return {"returncode": code, "timed_out": timed_out, "seconds": round(time.monotonic() - start, 3)}


def main() -> None:
    mode, control_fd = sys.argv[1], int(sys.argv[2])
    control = os.fdopen(control_fd, "w", encoding="utf-8")
    os.set_inheritable(control_fd, False)
    import torch  # noqa: F401  (before any fork: every exercise starts with it loaded)

    import seqlab.exercises  # noqa: F401
    from seqlab.grading import child  # noqa: F401
    from seqlab.grading.sandbox import read_frame

    for module in WARM_MODULES:                             # the course's own imports, loaded once, not per exercise
        try:
            importlib.import_module(module)
        except Exception:                                   # noqa: BLE001: a missing extra is imported (or not) later
            pass

    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)                  # no exercise may read this process's memory
    _call("prctl", PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)       # the exercise's init is this process's child
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    control.write(json.dumps({"ready": True, "mode": mode}) + "\n")
    control.flush()
    while True:
        order = read_frame(0)
        if order is None:
            return
        try:
            outcome = _run_one(order, mode)
        except Exception as err:                             # the worker's own failure: a grader error
            outcome = {"error": f"the sandbox's worker failed: {type(err).__name__}: {err}"}
        control.write(json.dumps(outcome) + "\n")
        control.flush()
        if "error" in outcome:
            return          # its job may be unread on stdin: never read it here; the grader starts a fresh worker


if __name__ == "__main__":
    main()
