"""Running a student's code in a child process that cannot hurt the grader, the machine or other students.

One child per exercise per submission. It is started through util-linux's ``unshare`` (and ``setpriv`` when
the grader runs as root), so that, strongest mode first:

- **namespaces+uid** (grader runs as root): a new network namespace with no interface up (no socket reaches
  anything, loopback included); a new PID namespace whose processes all die with the child (a daemon or a
  fork bomb leaves nothing behind); a new mount namespace in which the instructor folder, the submissions, the
  output folder, ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are replaced by empty private mounts; and the code
  runs as an unprivileged user id of its own (one of 60000-60063, leased with a lock file: :func:`lease_uid`),
  so it can write nowhere it does not own.
- **user-namespace** (an ordinary user whose kernel allows user namespaces): the same namespaces, but the
  code keeps the user's id; the course checkout and ``$HOME`` are mounted read-only instead.
- **rlimits-only** (no ``unshare``, or the kernel refuses it): only the resource limits below. The grader says
  so loudly and writes the mode into the gradebook.

In every mode: a wall-clock limit (then SIGKILL to the whole session, which no signal handler can refuse), and
limits the child sets on itself before it runs student code (:func:`apply_limits`): CPU seconds, address
space (memory), processes, file size, no core files; the child's environment is
built from scratch; its result channel is read up to a cap; stdin carries the job, pickled by the trusted
parent.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pickle
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import seqlab

SANDBOX_UID = 60000                  # + a slot: each child running at once has a user id of its own
SLOTS = 64                           # user ids 60000..60063, leased with a lock file (see lease_uid)
LOCK_DIR = Path(tempfile.gettempdir()) / "seqlab-sandbox"
MODES = ("namespaces+uid", "user-namespace", "rlimits-only")


@dataclass(frozen=True)
class Limits:
    """What one child may use: ``seconds`` of wall-clock time for one exercise (all its cases), ``memory``
    bytes of address space, ``processes`` (threads count too), ``output`` bytes of results, ``file`` bytes per
    file written."""

    seconds: float = 60.0
    memory: int = 6 * 2**30
    processes: int = 64
    output: int = 64 * 2**20
    file: int = 16 * 2**20


@dataclass
class ChildRun:
    """What came back: the result ``lines`` (raw bytes, one JSON message each, unparsed), and how it ended."""

    lines: list[bytes] = field(default_factory=list)
    timed_out: bool = False
    output_overflow: bool = False
    returncode: int | None = None
    seconds: float = 0.0
    stderr_tail: str = ""


def _limit(resource_id: int, value: int) -> None:
    try:
        resource.setrlimit(resource_id, (value, value))
    except (ValueError, OSError):          # a hard limit already below ours: keep it
        pass


def apply_limits(limits: dict) -> None:
    """Called by the child on itself, after its imports and before any student code (not in a ``preexec_fn``,
    which is unsafe when the grader starts children from several threads, as ``--jobs`` does)."""
    _limit(resource.RLIMIT_AS, limits["memory"])
    _limit(resource.RLIMIT_CPU, int(limits["seconds"]) + 10)  # a C loop that ignores signals still stops
    _limit(resource.RLIMIT_FSIZE, limits["file"])
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_NOFILE, 256)
    if os.getuid() != 0:                   # as root the count applies after setpriv: see the wrapper
        _limit(resource.RLIMIT_NPROC, len(_processes_of(os.getuid(), zombies=True)) + limits["processes"])


# The namespaces' pid 1 runs this shell: hide folders, then drop privileges (root) and start the child.
WRAPPER = r"""
set -e
mode=$1; uid=$2; nproc=$3; shift 3
hide=""; tmp=""; ro=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in hide:*) hide="$hide ${1#hide:}";; tmp:*) tmp="$tmp ${1#tmp:}";; ro:*) ro="$ro ${1#ro:}";; esac
  shift
done
shift
for d in $hide; do [ -d "$d" ] && mount -t tmpfs -o size=64k,mode=0 seqlab-hidden "$d"; done
for d in $tmp; do [ -d "$d" ] && mount -t tmpfs -o size=256m,mode=1777 seqlab-tmp "$d"; done
for d in $ro; do [ -d "$d" ] && mount --bind "$d" "$d" && mount -o remount,bind,ro "$d"; done
cd /tmp
if [ "$mode" = "namespaces+uid" ]; then
  exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all --bounding-set=-all \
       --no-new-privs -- prlimit --nproc="$nproc" -- "$@"
fi
exec "$@"
"""


def _needed_paths() -> list[Path]:
    """What the child itself needs to see: Python, its packages and seqlab (never hidden or covered)."""
    return [Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.executable,
                                        Path(seqlab.__file__).parent.parent)]


def _coverable(path: Path) -> bool:
    """``path`` can be hidden without hiding what the child needs (it holds none of :func:`_needed_paths`)."""
    return path.is_dir() and not any(p == path or path in p.parents for p in _needed_paths())


def _around_the_course(folder: Path) -> list[Path]:
    """The folders inside ``folder`` to hide when ``folder`` itself cannot be (it holds the course or Python):
    every subfolder but those that hold them, descending into their ancestors. A checkout under /tmp thus keeps
    the rest of /tmp (other graders' instructor folders, earlier test runs) out of the child's sight; the files
    directly in ``folder`` stay visible."""
    keep = [*_needed_paths(), *read_only_paths()[:1]]          # Python, seqlab, and the checkout as a whole
    found = []
    for child in sorted(folder.iterdir()):
        if child.is_symlink() or not child.is_dir():
            continue
        if any(child == p for p in keep):
            continue
        if any(child in p.parents for p in keep):
            found += _around_the_course(child)
        else:
            found.append(child)
    return found


def mount_plan(hide: list[Path], mode: str) -> list[str]:
    """The wrapper's arguments: folders to hide (``hide:``), scratch folders to replace by an empty private
    tmpfs (``tmp:``) and, without a user id of its own, folders to make read-only (``ro:``). A scratch folder
    that holds the course (a checkout under /tmp) cannot be replaced: its other folders are hidden instead."""
    plan = [f"hide:{p}" for p in dict.fromkeys(Path(h).resolve() for h in hide) if _coverable(p)]
    for scratch in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")):
        if _coverable(scratch):
            plan.append(f"tmp:{scratch}")
        elif scratch.is_dir():
            plan += [f"hide:{p}" for p in _around_the_course(scratch.resolve()) if f"hide:{p}" not in plan]
    if mode == "user-namespace":
        plan += [f"ro:{p}" for p in read_only_paths()]
    return plan


def _unshare_prefix(mode: str) -> list[str]:
    flags = ["--mount", "--propagation", "private", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if mode == "user-namespace":
        flags = ["--user", "--map-root-user", *flags]
    return ["unshare", *flags, "--", "/bin/sh", "-c", WRAPPER, "seqlab-sandbox"]


@functools.lru_cache(maxsize=None)
def isolation_mode() -> str:
    """The strongest mode this machine allows (see the module docstring); probed once per process."""
    if sys.platform != "linux" or not shutil.which("unshare"):
        return "rlimits-only"
    candidates = ["namespaces+uid", "user-namespace"] if os.getuid() == 0 else ["user-namespace"]
    for mode in candidates:
        if mode == "namespaces+uid" and not (shutil.which("setpriv") and shutil.which("prlimit")):
            continue
        probe = [*_unshare_prefix(mode), mode, str(SANDBOX_UID), "16", "--", "/bin/true"]
        try:
            if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
                return mode
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "rlimits-only"


def child_environment() -> dict[str, str]:
    """The child's whole environment: nothing of the grader's (no tokens, no paths to the key)."""
    package_root = str(Path(seqlab.__file__).resolve().parent.parent)
    return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
            "PYTHONPATH": package_root, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/mpl"}


def read_only_paths() -> list[Path]:
    """What a user-namespace child must not change: the course checkout (or installed package) and $HOME."""
    package_root = Path(seqlab.__file__).resolve().parent.parent
    paths = [package_root.parent if (package_root.parent / "course.py").exists() else package_root,
             Path.home()]
    return [p for p in dict.fromkeys(paths) if p.is_dir() and p != Path("/")]


@contextlib.contextmanager
def lease_uid(preferred: int = 0):
    """A sandbox user id that no other child uses meanwhile, in this process or another (two graders, or the
    test workers): an exclusive lock on ``LOCK_DIR/<slot>.lock``, released when the block ends or the process
    dies. Killing "every process of this uid" after a child is then safe."""
    LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    while True:
        for k in range(SLOTS):
            slot = (preferred + k) % SLOTS
            handle = open(LOCK_DIR / f"{slot}.lock", "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield SANDBOX_UID + slot
            finally:
                handle.close()
            return
        time.sleep(0.1)


def run_child(job: dict, limits: Limits, *, hide: list[Path], slot: int = 0, mode: str | None = None) -> ChildRun:
    """Run ``python -m seqlab.grading.child`` on ``job`` under ``limits``; return its raw result lines.
    ``slot``: the sandbox user id to try first (another is leased if it is in use)."""
    mode = mode or isolation_mode()
    with lease_uid(slot) as uid:
        return _run_child(job, limits, hide=hide, uid=uid, mode=mode)


def _run_child(job: dict, limits: Limits, *, hide: list[Path], uid: int, mode: str) -> ChildRun:
    python = [sys.executable, "-m", "seqlab.grading.child"]
    if mode == "rlimits-only":
        command = python
    else:
        command = [*_unshare_prefix(mode), mode, str(uid), str(limits.processes),
                   *mount_plan(hide, mode), "--", *python]
    run = ChildRun()
    start = time.monotonic()
    job = {**job, "limits": {"memory": limits.memory, "seconds": limits.seconds, "file": limits.file,
                             "processes": limits.processes}}
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_environment(), cwd="/", start_new_session=True)
    def send_job(data: bytes = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)) -> None:
        try:                               # in a thread: a large job must not block the clock below
            proc.stdin.write(data)
            proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass
    threading.Thread(target=send_job, daemon=True).start()
    buffer, stderr = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, "out")
        selector.register(proc.stderr, selectors.EVENT_READ, "err")
        open_streams = 2
        while open_streams:
            left = limits.seconds - (time.monotonic() - start)
            if left <= 0:
                run.timed_out = True
                break
            for key, _ in selector.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fileobj.fileno(), 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
                elif key.data == "out":
                    buffer += chunk
                    if len(buffer) > limits.output:
                        run.output_overflow = True
                        open_streams = 0
                        break
                else:
                    stderr = (stderr + chunk)[-4000:]
    _kill_group(proc)
    run.returncode = proc.returncode
    run.seconds = time.monotonic() - start
    run.lines = bytes(buffer[: limits.output]).splitlines()
    run.stderr_tail = stderr.decode("utf-8", "replace")
    if mode == "namespaces+uid":
        _kill_user(uid)
    return run


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole session (``unshare``'s exit then kills its PID namespace), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        stream.close()


def _processes_of(uid: int, *, zombies: bool = False) -> list[int]:
    """Processes running as ``uid``: the live ones, or with ``zombies`` also those not yet reaped (which
    RLIMIT_NPROC counts)."""
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
    """Belt and braces after a namespaces+uid child: kill every process of the sandbox's user id, and wait
    until none is left (the kernel ends a killed PID namespace asynchronously)."""
    deadline = time.monotonic() + patience
    while (alive := _processes_of(uid)) and time.monotonic() < deadline:
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


def leftover_processes() -> list[int]:
    """Live processes of a sandbox user id that no child holds any more: what a child left behind (a test
    asks that there are none). A user id still leased belongs to a child that is running now."""
    LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    found = []
    for slot in range(SLOTS):
        with open(LOCK_DIR / f"{slot}.lock", "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            found += _processes_of(SANDBOX_UID + slot)
    return found
