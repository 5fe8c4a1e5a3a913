"""Running a student's code where it sees only what it needs: Python, its packages and seqlab.

The sandbox is built from an allowlist, not from a list of things to hide. bubblewrap (``bwrap``, Debian's
``bubblewrap``) gives each *worker* an empty root into which it binds, read-only, only Python, the environment
and the folder that holds seqlab, then ``pivot_root`` s into it: submissions, rosters, other students' grades,
the instructor folder, ``$HOME`` and ``/run`` are not hidden, they are simply absent. The worker has its own
network (no interface up), PID, IPC, UTS and mount namespaces.

A worker (:mod:`seqlab.grading.worker`) imports torch and seqlab once and then, for every exercise, forks a
process of its own: new PID, IPC, network and mount namespaces (so everything it starts dies with it), a fresh
``/tmp`` and ``/dev/shm``, a read-only ``/dev``, its own ``/proc``; then it drops every privilege and runs the
answer. Start-up is paid once per worker, not once per exercise. Modes, strongest first:

- **bwrap+uid** (the grader runs as root): bwrap without a user namespace; each exercise's process runs as a
  user id of its own (60000 + its slot, verified to be nobody's: not in the passwd database, no process), with
  no capabilities and ``no_new_privs``, and, where the machine offers a memory and a pids cgroup controller, in
  a cgroup of its slot (``memory`` and ``pids`` limits for all its processes together).
- **bwrap-userns** (an ordinary user, where the kernel allows user namespaces): the same root and namespaces
  inside a user namespace; each exercise's process gives up every capability (bounding set, securebits,
  ``no_new_privs``), so the mounts made by bwrap cannot be undone from inside. Its user id outside is the
  grader's own: processes are bounded by ``RLIMIT_NPROC`` counted within the worker's user namespace.
- **rlimits-only** (no bwrap or no namespaces): resource limits only. ``grade`` refuses it unless asked;
  ``selfcheck`` (a student checking their own notebook) may use it.

In every mode: a wall-clock limit per exercise (then SIGKILL, which no handler can refuse), limits the process
sets on itself before any student code runs (CPU seconds, address space, processes, file size, no core
files, open files), an environment built from scratch, and a result channel read up to a cap.

Hidden cases run in a worker of their own that never runs a public case: a public answer can never find a
hidden input in its memory, its ``/tmp`` or its process, and what comes back of a hidden case is judged to
pass or fail and nothing else (:mod:`seqlab.grading.grader`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import pickle
import pwd
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import seqlab

SANDBOX_UID = 60000                  # + a slot: each exercise running at once has a user id of its own
SLOTS = 64                           # user ids 60000..60063, leased with a lock file (see lease_slot)
SLOT_WAIT_SECONDS = 600.0            # how long a grader waits for a free slot before it gives up, loudly
WORKER_START_SECONDS = 120.0         # importing torch on a busy machine
MODES = ("bwrap+uid", "bwrap-userns", "rlimits-only")
STRONG_MODES = MODES[:2]
CGROUP_NAME = "seqlab-sandbox"


class GraderError(RuntimeError):
    """The grader, not the student, failed: a worker would not start, a slot could not be leased, the
    sandbox user cannot read Python. Never graded as the student's zero."""


@dataclass(frozen=True)
class Limits:
    """What one exercise may use: ``seconds`` of wall-clock time (all its cases), ``memory`` bytes (address
    space per process and, in a cgroup, all its processes together), ``processes`` (threads count too),
    ``output`` bytes of results, ``file`` bytes per file written."""

    seconds: float = 60.0
    memory: int = 6 * 2**30
    processes: int = 64
    output: int = 64 * 2**20
    file: int = 16 * 2**20

    def as_dict(self) -> dict:
        return {"seconds": self.seconds, "memory": self.memory, "processes": self.processes, "file": self.file}


@dataclass
class ChildRun:
    """What came back from one exercise: the result ``lines`` (raw bytes, one JSON message each, unparsed)
    and how it ended. ``grader_error`` is set when the exercise could not be run at all (not the student's
    doing); ``memory_exceeded`` when its cgroup hit the memory limit."""

    lines: list[bytes] = field(default_factory=list)
    timed_out: bool = False
    output_overflow: bool = False
    returncode: int | None = None
    seconds: float = 0.0
    stderr_tail: str = ""
    memory_exceeded: bool = False
    grader_error: str | None = None
    retried: str | None = None

    @property
    def started(self) -> bool:
        """The exercise's process reached the student's code: its first line is the "ready" event, sent before."""
        return bool(self.lines) and b'"event": "ready"' in self.lines[0]

    def grader_failure(self) -> str | None:
        """Why the grader itself could not run the exercise (never the student's doing: nothing of theirs runs
        before "ready"), or None."""
        if self.grader_error:
            return self.grader_error
        if self.started:
            return None
        for raw in self.lines[:2]:
            try:
                message = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(message, dict) and message.get("event") == "setup_failed":
                return f"the exercise's process could not be set up: {str(message.get('error'))[:300]}"
        return f"the exercise's process ended before running the answer (exit {self.returncode})"


# -- frames between the grader and its worker: a 4-byte length, then a pickle (sent by the trusted side) ----

def send_frame(fd: int, message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, struct.pack(">I", len(data)) + data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int) -> object | None:
    """One frame from ``fd`` read with ``os.read`` exactly (never more: the next frame is someone else's);
    None at end of file."""
    head = _read_exactly(fd, 4)
    if head is None:
        return None
    body = _read_exactly(fd, struct.unpack(">I", head)[0])
    if body is None:
        return None
    return pickle.loads(body)


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# -- what the sandbox may see ---------------------------------------------------------------------------

def package_root() -> Path:
    """The folder that holds the ``seqlab`` package (``lib/`` in a checkout, site-packages when installed)."""
    return Path(seqlab.__file__).resolve().parent.parent


def python_paths() -> list[Path]:
    """Python, its environment and seqlab: bound read-only at the same paths, and nothing else of the
    grader's files."""
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent,
             Path(sys.executable).parent.resolve(), package_root()}
    return sorted((p for p in paths if p.is_dir() and p != Path("/")), key=lambda p: (len(p.parts), str(p)))


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf")


def _bind_arguments() -> list[str]:
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for name in SYSTEM_FILES:
        if Path(name).exists():
            args += ["--ro-bind", name, name]
    if Path("/etc/ld.so.conf.d").is_dir():
        args += ["--ro-bind", "/etc/ld.so.conf.d", "/etc/ld.so.conf.d"]
    made: set[Path] = set()
    for path in python_paths():
        if any(str(path).startswith(d + "/") for d in SYSTEM_DIRS if Path(d).is_dir()):
            continue
        for parent in reversed(path.parents[:-1]):     # bwrap would make them 0700: the sandbox user could not pass
            if parent not in made and not any(parent == p or parent in p.parents for p in made if p != parent):
                args += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
        args += ["--ro-bind", str(path), str(path)]
        made.add(path)
    return args


def bwrap_command(mode: str) -> list[str]:
    """bubblewrap's arguments for a worker in ``mode`` (everything before the command it runs)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise GraderError("bubblewrap (bwrap) is not installed")
    command = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--die-with-parent", "--new-session", "--hostname", "seqlab-sandbox",
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", *_bind_arguments(),
               "--remount-ro", "/", "--chdir", "/"]
    if mode == "bwrap-userns":
        command[1:1] = ["--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "ALL"]
    return command


def paths_in_scratch() -> list[str]:
    """The bound paths that live in /tmp (a checkout made with ``mktemp -d``): an exercise's fresh /tmp must
    show them again."""
    inside = [p for p in python_paths() if Path("/tmp") in p.parents]
    return [str(p) for p in inside if not any(q in p.parents for q in inside)]      # .venv, not also .venv/bin


def child_environment() -> dict[str, str]:
    """The worker's whole environment: nothing of the grader's (no tokens, no paths to the key)."""
    return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
            "PYTHONPATH": str(package_root()), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
            "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": "/tmp/mpl"}


@functools.lru_cache(maxsize=None)
def available_modes() -> tuple[str, ...]:
    """Every mode this machine allows, strongest first (``rlimits-only`` always last); probed once."""
    found = []
    if sys.platform == "linux" and shutil.which("bwrap") is not None:
        for mode in (["bwrap+uid", "bwrap-userns"] if os.geteuid() == 0 else ["bwrap-userns"]):
            probe = [*bwrap_command(mode), sys.executable, "-S", "-c", _PROBE, mode, str(SANDBOX_UID)]
            try:
                done = subprocess.run(probe, capture_output=True, timeout=60, env=child_environment(), cwd="/",
                                      umask=0o022)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if done.returncode == 0 and done.stdout.strip() == b"ok":
                found.append(mode)
    return (*found, "rlimits-only")


def isolation_mode() -> str:
    """The strongest mode this machine allows (see the module docstring)."""
    return available_modes()[0]


def bounds_processes(mode: str) -> bool:
    """Whether ``mode`` bounds how many processes an answer can start. A user namespace made by root maps
    to root itself, which ``RLIMIT_NPROC`` never bounds (root grades in ``bwrap+uid``, which does)."""
    if mode == "bwrap+uid":
        return True
    if mode == "bwrap-userns":
        try:
            outside = [line.split() for line in Path("/proc/self/uid_map").read_text().splitlines()]
        except OSError:
            return os.geteuid() != 0
        uid = os.geteuid()
        for inside, start, count in ((int(a), int(b), int(c)) for a, b, c in outside):
            if inside <= uid < inside + count:
                return start + uid - inside != 0
    return os.geteuid() != 0


# The probe: can this mode give an exercise's process its own namespaces, mounts and (root) user id?
_PROBE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x20000000 | 0x00020000 | 0x08000000 | 0x40000000) != 0:
    sys.exit("unshare")
if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"size=1m") != 0:
    sys.exit("mount")
if sys.argv[1] == "bwrap+uid":
    os.setgroups([]); os.setresgid(int(sys.argv[2]), int(sys.argv[2]), int(sys.argv[2]))
    os.setresuid(int(sys.argv[2]), int(sys.argv[2]), int(sys.argv[2]))
print("ok")
"""


def mode_description(mode: str) -> str:
    return {"bwrap+uid": "an allowlist root (bubblewrap), new namespaces and a user id of its own per exercise",
            "bwrap-userns": "an allowlist root (bubblewrap) and new namespaces in a user namespace, no "
                            "capabilities; the grader's own user id outside",
            "rlimits-only": "resource limits only: no file, network or process separation"}[mode]


# -- slots: a lock, a user id and a cgroup per exercise running at once ----------------------------------

def lock_dir() -> Path:
    """The lock folder of this grader's user: only that user can write it. Root's is shared by every root
    grader on the machine (their sandbox user ids must not collide); an ordinary user's is their own."""
    euid = os.geteuid()
    if euid == 0 and os.access("/run", os.W_OK):
        return Path("/run") / "seqlab-sandbox"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if euid != 0 and runtime and Path(runtime).is_dir() and Path(runtime).stat().st_uid == euid:
        return Path(runtime) / "seqlab-sandbox"
    return Path(tempfile.gettempdir()) / f"seqlab-sandbox-{euid}"


def checked_lock_dir() -> Path:
    """:func:`lock_dir`, made if missing, and refused unless it is a real folder (not a symlink), owned by
    this user and closed to everyone else (someone else's folder in a shared /tmp is never trusted)."""
    folder = lock_dir()
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise GraderError(f"the sandbox's lock folder {folder} is not a private folder of this user (it is "
                          f"{'a symlink' if stat.S_ISLNK(info.st_mode) else oct(info.st_mode)}, owned by uid "
                          f"{info.st_uid}); remove it or set TMPDIR to a private folder")
    return folder


def uid_is_free(uid: int) -> bool:
    """A sandbox user id must be nobody's: not in the passwd database, and no process runs as it."""
    try:
        pwd.getpwuid(uid)
        return False
    except KeyError:
        return not _processes_of(uid)


@dataclass
class Slot:
    number: int
    uid: int
    handle: int


@contextlib.contextmanager
def lease_slot(preferred: int = 0, wait: float = SLOT_WAIT_SECONDS):
    """A slot no other exercise uses meanwhile, in this process or another (two graders, the test workers):
    an exclusive lock on ``<lock_dir>/<slot>.lock``, held until the block ends or the process dies."""
    folder = checked_lock_dir()
    deadline = time.monotonic() + wait
    while True:
        for k in range(SLOTS):
            number = (preferred + k) % SLOTS
            fd = os.open(folder / f"{number}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            uid = SANDBOX_UID + number
            if os.geteuid() == 0 and not uid_is_free(uid):
                os.close(fd)                     # someone's account, or a process left running: never share it
                continue
            try:
                yield Slot(number, uid, fd)
            finally:
                os.close(fd)
            return
        if time.monotonic() > deadline:
            raise GraderError(f"no free sandbox slot after {wait:.0f} s: all {SLOTS} locks in {folder} are "
                              "held (other graders running?), or their user ids are taken")
        time.sleep(0.1)


def _cgroup_roots() -> dict[str, Path]:
    """Where this machine lets root make a memory and a pids cgroup: cgroup v1 hierarchies, or v2's."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():               # v2, unified
        controllers = (base / "cgroup.controllers").read_text().split()
        if {"memory", "pids"} <= set(controllers):
            return {"v2": base}
        return {}
    return {name: base / name for name in ("memory", "pids") if (base / name / "cgroup.procs").exists()}


class SlotCgroup:
    """The cgroups of one slot (root only): every process of an exercise joins them, so ``memory`` and
    ``processes`` bound the exercise as a whole, not each process. Missing controllers are reported."""

    def __init__(self, number: int):
        self.dirs: dict[str, Path] = {}
        self.fds: list[int] = []
        if os.geteuid() != 0:
            return
        for kind, root in _cgroup_roots().items():
            try:
                parent = root / CGROUP_NAME
                parent.mkdir(exist_ok=True)
                if kind == "v2":
                    (parent / "cgroup.subtree_control").write_text("+memory +pids")
                folder = parent / f"slot-{number}"
                folder.mkdir(exist_ok=True)
                self.dirs[kind] = folder
                self.fds.append(os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
            except OSError:
                continue

    @property
    def description(self) -> str:
        return "cgroup " + "+".join(sorted(self.dirs)) if self.dirs else "no cgroup"

    def set_limits(self, limits: Limits) -> None:
        for kind, folder in self.dirs.items():
            files = {"memory": {"memory.limit_in_bytes": limits.memory},
                     "pids": {"pids.max": limits.processes},
                     "v2": {"memory.max": limits.memory, "memory.swap.max": 0, "pids.max": limits.processes}}[kind]
            for name, value in files.items():
                with contextlib.suppress(OSError):
                    (folder / name).write_text(str(value))

    def memory_events(self) -> int:
        """How often the memory limit was hit so far (v1 ``failcnt``, v2 ``max`` events)."""
        with contextlib.suppress(OSError, ValueError):
            if "memory" in self.dirs:
                return int((self.dirs["memory"] / "memory.failcnt").read_text())
            if "v2" in self.dirs:
                events = dict(line.split() for line in (self.dirs["v2"] / "memory.events").read_text().splitlines())
                return int(events.get("oom_kill", 0)) + int(events.get("max", 0))
        return 0

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


# -- a worker: one sandboxed Python that forks a process per exercise --------------------------------------

class Worker:
    """One sandboxed worker of one slot (see the module docstring); ``run`` grades one exercise's job."""

    def __init__(self, mode: str, slot: Slot, cgroup: SlotCgroup | None):
        self.mode, self.slot, self.cgroup = mode, slot, cgroup
        self.proc: subprocess.Popen | None = None
        self.control_fd = -1
        self._control_buffer = b""

    def start(self) -> None:
        read_end, write_end = os.pipe()
        os.set_inheritable(write_end, True)
        python = [sys.executable, "-m", "seqlab.grading.worker", self.mode, str(write_end)]
        command = python if self.mode == "rlimits-only" else [*bwrap_command(self.mode), *python]
        fds = (write_end, *(self.cgroup.fds if self.cgroup else ()))
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=child_environment(), cwd="/",
                                     start_new_session=True, pass_fds=fds, umask=0o022)
        os.close(write_end)
        self.control_fd = read_end
        ready = self._control_message(WORKER_START_SECONDS)
        if not ready or not ready.get("ready"):
            tail = self._stderr_tail()
            self.close()
            raise GraderError(f"the sandbox's worker ({self.mode}) did not start"
                              + (f": {tail.strip()[-600:]}" if tail.strip() else ""))

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _control_message(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._control_buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            with selectors.DefaultSelector() as selector:
                selector.register(self.control_fd, selectors.EVENT_READ)
                if not selector.select(timeout=min(left, 1.0)):
                    if self.proc.poll() is not None:
                        return None
                    continue
            chunk = os.read(self.control_fd, 1 << 16)
            if not chunk:
                return None
            self._control_buffer += chunk
        line, self._control_buffer = self._control_buffer.split(b"\n", 1)
        return json.loads(line)

    def _stderr_tail(self) -> str:
        if self.proc is None or self.proc.stderr is None:
            return ""
        os.set_blocking(self.proc.stderr.fileno(), False)
        try:
            data = self.proc.stderr.read() or b""
        except (OSError, ValueError):
            data = b""
        return data.decode("utf-8", "replace")[-4000:]

    def run(self, job: dict, limits: Limits) -> ChildRun:
        """Send ``job`` to a fresh process of its own and collect what it reports, within ``limits``."""
        run = ChildRun()
        start = time.monotonic()
        if self.cgroup is not None:
            self.cgroup.set_limits(limits)
        memory_before = self.cgroup.memory_events() if self.cgroup else 0
        order = {"op": "run", "limits": limits.as_dict(), "uid": self.slot.uid, "keep": paths_in_scratch(),
                 "cgroup_fds": list(self.cgroup.fds) if self.cgroup else []}
        payload = (struct.pack(">I", len(o := pickle.dumps(order))) + o
                   + struct.pack(">I", len(j := pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))) + j)

        def send() -> None:                  # in a thread: a large job must not hold up the clock below
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.write(payload)
                self.proc.stdin.flush()
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        buffer = bytearray()
        outcome = None
        stdout = self.proc.stdout.fileno()
        os.set_blocking(stdout, False)
        watchdog = start + limits.seconds + 30        # the worker kills on time; this is if the worker hangs
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ, "out")
            selector.register(self.control_fd, selectors.EVENT_READ, "control")
            while outcome is None:
                if b"\n" in self._control_buffer:
                    outcome = self._control_message(0)
                    break
                if time.monotonic() > watchdog:
                    break
                for key, _ in selector.select(timeout=1.0):
                    if key.data == "out":
                        buffer += self._drain(stdout, len(buffer), limits, run)
                    else:
                        chunk = os.read(self.control_fd, 1 << 16)
                        if not chunk:
                            watchdog = 0              # the worker is gone
                            break
                        self._control_buffer += chunk
        buffer += self._drain(stdout, len(buffer), limits, run)    # all the process wrote is in the pipe now
        run.seconds = time.monotonic() - start
        run.lines = bytes(buffer[: limits.output]).splitlines()
        if outcome is None:
            run.grader_error = "the sandbox's worker stopped answering" + (
                f": {self._stderr_tail().strip()[-300:]}" if not self.alive else "")
            self.close()
            return run
        if outcome.get("error"):
            run.grader_error = outcome["error"]
            return run
        run.timed_out = bool(outcome.get("timed_out"))
        run.returncode = outcome.get("returncode")
        run.seconds = outcome.get("seconds", run.seconds)
        run.memory_exceeded = bool(self.cgroup) and self.cgroup.memory_events() > memory_before
        return run

    def _drain(self, fd: int, have: int, limits: Limits, run: ChildRun) -> bytes:
        got = bytearray()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            if have + len(got) < limits.output:
                got += chunk
            else:
                run.output_overflow = True       # keep reading (the process must not block), keep nothing
        return bytes(got)

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()             # the worker's loop ends at end of input: a clean exit
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
            for stream in (self.proc.stdout, self.proc.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
            self.proc = None
        if self.control_fd >= 0:
            os.close(self.control_fd)
            self.control_fd = -1


class Sandbox:
    """The grader's workers for one slot: one for public cases and, apart, one for hidden cases. Start-up
    (Python, torch, seqlab) is paid once per worker; each exercise still gets a process of its own."""

    def __init__(self, mode: str | None = None, preferred: int = 0):
        self.mode = mode or isolation_mode()
        self.preferred = preferred
        self._lease = None
        self.slot: Slot | None = None
        self.cgroup: SlotCgroup | None = None
        self.workers: dict[str, Worker] = {}

    def __enter__(self) -> Sandbox:
        self._lease = lease_slot(self.preferred)
        self.slot = self._lease.__enter__()
        if self.mode == "bwrap+uid":
            self.cgroup = SlotCgroup(self.slot.number)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()
        self.workers = {}
        if self.mode == "bwrap+uid" and self.slot is not None:
            _kill_user(self.slot.uid)
        if self.cgroup is not None:
            self.cgroup.close()
            self.cgroup = None
        if self._lease is not None:
            self._lease.__exit__(None, None, None)
            self._lease = None

    @property
    def description(self) -> str:
        cgroup = f", {self.cgroup.description}" if self.cgroup else ""
        return f"{self.mode}{cgroup}"

    def describe(self, limits: Limits) -> str:
        """The gradebook's ``isolation`` cell: the mode and the memory cap that applied."""
        whole = self.cgroup is not None and bool({"memory", "v2"} & set(self.cgroup.dirs))
        return (f"{self.mode}; memory {limits.memory / 2**30:g} GiB "
                f"{'per exercise (cgroup)' if whole else 'per process'}")

    def run(self, job: dict, limits: Limits, *, hidden: bool = False) -> ChildRun:
        """Run ``job`` in this slot's worker for its role. A run the grader could not carry out (a worker that
        did not start or stopped answering, a process that ended before the answer's code) is tried once more
        in a fresh worker, since a busy machine can fail once; ``retried`` then says why the first failed."""
        run = self._run_once(job, limits, hidden)
        first = run.grader_failure()
        if first is not None:
            worker = self.workers.pop("hidden" if hidden else "public", None)
            if worker is not None:                       # alive or not: the next run starts a fresh one
                worker.close()
            run = self._run_once(job, limits, hidden)
            run.retried = first
        return run

    def _run_once(self, job: dict, limits: Limits, hidden: bool) -> ChildRun:
        role = "hidden" if hidden else "public"
        worker = self.workers.get(role)
        try:
            if worker is None or not worker.alive:
                if worker is not None:
                    worker.close()
                worker = self.workers[role] = Worker(self.mode, self.slot, self.cgroup)
                worker.start()
        except GraderError as err:
            self.workers.pop(role, None)
            return ChildRun(grader_error=str(err))
        run = worker.run(job, limits)
        if self.mode == "bwrap+uid":
            _kill_user(self.slot.uid)            # belt and braces: the process's namespace has died with it
        return run


_shared: dict[str, Sandbox] = {}
_shared_lock = threading.Lock()


def shared_sandbox(mode: str | None = None) -> Sandbox:
    """A sandbox kept for the life of this process (tests, ``selfcheck``): closed at exit."""
    mode = mode or isolation_mode()
    with _shared_lock:
        if mode not in _shared:
            import atexit
            box = _shared[mode] = Sandbox(mode).__enter__()
            atexit.register(box.close)
        return _shared[mode]


def run_child(job: dict, limits: Limits, *, mode: str | None = None, hidden: bool = False,
              sandbox: Sandbox | None = None) -> ChildRun:
    """Run one exercise's ``job`` in ``sandbox`` (or the process's shared one)."""
    box = sandbox or shared_sandbox(mode)
    with _shared_lock if sandbox is None else contextlib.nullcontext():
        return box.run(job, limits, hidden=hidden)


# -- the preflight: can the sandbox's user run Python and import seqlab? -------------------------------------

def _unreadable(paths: list[Path], limit: int = 200_000) -> Path | None:
    """The first folder or file under ``paths`` that a user who is neither its owner nor in its group cannot
    read (folders: read and search; files: read). Sandbox user ids are such users."""
    seen = 0
    for root in paths:
        for folder, dirs, files in os.walk(root):
            for name in [folder, *(os.path.join(folder, f) for f in files)]:
                seen += 1
                try:
                    info = os.lstat(name)
                except OSError:
                    continue
                if stat.S_ISLNK(info.st_mode):
                    continue
                need = 0o005 if stat.S_ISDIR(info.st_mode) else 0o004
                if info.st_mode & need != need:
                    return Path(name)
                if seen > limit:
                    return None
            dirs[:] = [d for d in dirs if d != "__pycache__"]
    return None


def preflight(mode: str | None = None) -> str:
    """Start a fresh Python as the sandbox's user, in ``mode``, and import seqlab's checkers and torch. Returns
    the mode's description; raises :class:`GraderError` naming what is wrong (and how to fix it) otherwise."""
    mode = mode or isolation_mode()
    code = ("import torch\nfrom seqlab.exercises import EXERCISES\nfrom seqlab.grading import child, worker\n"
            "assert EXERCISES, 'no exercises registered'\nprint('ok')")
    python = [sys.executable, "-c", code]
    with lease_slot() as slot:                   # a user id no other grader uses (it kills its own leftovers)
        if mode == "bwrap+uid":
            python = ["setpriv", f"--reuid={slot.uid}", f"--regid={slot.uid}", "--clear-groups", "--no-new-privs",
                      "--", *python]
        command = python if mode == "rlimits-only" else [*bwrap_command(mode), *python]
        done = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            done = subprocess.run(command, capture_output=True, timeout=WORKER_START_SECONDS,
                                  env=child_environment(), cwd="/", umask=0o022)
    if done is None:
        ok, err = False, f"it did not finish in {WORKER_START_SECONDS:.0f} s"
    else:
        ok = done.returncode == 0 and done.stdout.strip().endswith(b"ok")
        err = (f"exit {done.returncode}; stdout {done.stdout.decode('utf-8', 'replace')[-300:]!r}; "
               f"stderr {done.stderr.decode('utf-8', 'replace')[-1500:]}")
    if ok:
        return mode_description(mode)
    message = f"the grader's sandbox ({mode}) cannot run Python and import seqlab as the sandbox's user."
    if mode == "bwrap+uid":
        blocked = _unreadable(python_paths())
        if blocked is not None:
            message += (f" {blocked} is not readable by other users (mode {oct(os.lstat(blocked).st_mode & 0o777)}); "
                        f"the sandbox runs student code as user id {SANDBOX_UID}+, which must read Python, its "
                        f"packages and seqlab. Fix: chmod -R o+rX {blocked}, or clone and set up the course "
                        "with a umask of 022.")
    raise GraderError(message + f"\n{err.strip()[-1500:]}")


# -- processes ----------------------------------------------------------------------------------------------

def _processes_of(uid: int, *, zombies: bool = False) -> list[int]:
    """Processes running as ``uid``: the live ones, or with ``zombies`` also those not yet reaped."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and (zombies or ") Z " not in (entry / "stat").read_text()):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _kill_user(uid: int, patience: float = 10.0) -> None:
    """Kill every process of a sandbox user id, and wait until none is left."""
    deadline = time.monotonic() + patience
    while (alive := _processes_of(uid)) and time.monotonic() < deadline:
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def leftover_processes() -> list[int]:
    """Live processes of a sandbox user id whose slot no grader holds: what an exercise left behind."""
    try:
        folder = checked_lock_dir()
    except GraderError:
        return []
    found = []
    for number in range(SLOTS):
        fd = os.open(folder / f"{number}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        else:
            found += _processes_of(SANDBOX_UID + number)
        finally:
            os.close(fd)
    return found


__all__ = ["ChildRun", "GraderError", "Limits", "MODES", "Sandbox", "isolation_mode", "lease_slot",
           "leftover_processes", "preflight", "run_child", "shared_sandbox"]
