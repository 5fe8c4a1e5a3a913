"""Cgroups and system users for seqlab's hub on one machine (hub/seqlab_hub.py's spawner, and scripts/hub_run.py,
which reads the students' groups and cleans up after a test). Standard library only.

What the spawner does with them is told in hub/seqlab_hub.py's docstring. ``cgroup_usage(name)`` reads a running
student's group: peak memory, OOM kills and CPU seconds (make hub-load prints them).
"""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
import time
from pathlib import Path


CGROUP_ROOT = Path("/sys/fs/cgroup")
# system user names the spawner will create: lower case, a letter first, short (useradd's own rules, tighter)
USER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")


def cgroup_version(root: Path = CGROUP_ROOT) -> int:
    """2 on a unified (v2 only) hierarchy, 1 where the v1 memory controller is mounted (v1 or hybrid)."""
    if (root / "memory" / "memory.limit_in_bytes").exists():
        return 1
    if (root / "cgroup.controllers").exists():
        return 2
    raise RuntimeError(f"no cgroup memory controller under {root}: the hub cannot give each student a memory limit")


def group_dirs(parent: str, name: str, root: Path = CGROUP_ROOT) -> dict[str, Path]:
    """The student's group folders: {"memory": ..., "cpu": ..., "cpuacct": ...} (v1: cpuacct is its own hierarchy
    on some machines, a link to "cpu,cpuacct" on others; v2: one folder for all three)."""
    if cgroup_version(root) == 1:
        return {c: root / c / parent / name for c in ("memory", "cpu", "cpuacct")}
    return {c: root / parent / name for c in ("memory", "cpu", "cpuacct")}


def _read_key(path: Path, key: str) -> int | None:
    try:
        for row in path.read_text().splitlines():
            k, _, v = row.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        return None
    return None


def cgroup_usage(parent: str, name: str, root: Path = CGROUP_ROOT) -> dict[str, object] | None:
    """A student's group now: peak and current memory (bytes), the limit, OOM kills, CPU seconds, its pids."""
    dirs = group_dirs(parent, name, root)
    memory, cpu = dirs["memory"], dirs["cpu"]
    if not memory.exists():
        return None

    def number(path: Path) -> int | None:
        try:
            text = path.read_text().strip()
            return None if text == "max" else int(text.split()[0])
        except (OSError, ValueError, IndexError):
            return None

    if cgroup_version(root) == 1:
        usage = {"peak_bytes": number(memory / "memory.max_usage_in_bytes"),
                 "current_bytes": number(memory / "memory.usage_in_bytes"),
                 "limit_bytes": number(memory / "memory.limit_in_bytes"),
                 "oom_kills": _read_key(memory / "memory.oom_control", "oom_kill"),
                 "cpu_seconds": (number(dirs["cpuacct"] / "cpuacct.usage") or 0) / 1e9}
    else:
        usage = {"peak_bytes": number(memory / "memory.peak"), "current_bytes": number(memory / "memory.current"),
                 "limit_bytes": number(memory / "memory.max"),
                 "oom_kills": _read_key(memory / "memory.events", "oom_kill"),
                 "cpu_seconds": (_read_key(cpu / "cpu.stat", "usage_usec") or 0) / 1e6}
    usage["pids"] = group_pids(dirs)
    return usage


def group_pids(dirs: dict[str, Path]) -> list[int]:
    pids = set()
    for folder in set(dirs.values()):
        try:
            pids.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            pass
    return sorted(pids)


def make_groups(parent: str, name: str, mem_limit: int | None, cpu_limit: float | None,
                root: Path = CGROUP_ROOT) -> dict[str, Path]:
    """Create (or keep) the student's groups with their limits; returns their folders."""
    version = cgroup_version(root)
    dirs = group_dirs(parent, name, root)
    if version == 2:
        top = root / parent
        top.mkdir(exist_ok=True)
        (root / "cgroup.subtree_control").write_text("+memory +cpu")
        (top / "cgroup.subtree_control").write_text("+memory +cpu")
    for folder in set(dirs.values()):
        folder.mkdir(parents=True, exist_ok=True)
    memory, cpu = dirs["memory"], dirs["cpu"]
    if version == 1:
        if mem_limit:
            (memory / "memory.limit_in_bytes").write_text(str(mem_limit))
            if (memory / "memory.memsw.limit_in_bytes").exists():        # no swapping past the limit either
                (memory / "memory.memsw.limit_in_bytes").write_text(str(mem_limit))
        if cpu_limit:
            (cpu / "cpu.cfs_period_us").write_text("100000")
            (cpu / "cpu.cfs_quota_us").write_text(str(int(cpu_limit * 100000)))
    else:
        if mem_limit:
            (memory / "memory.max").write_text(str(mem_limit))
            (memory / "memory.swap.max").write_text("0") if (memory / "memory.swap.max").exists() else None
        if cpu_limit:
            (cpu / "cpu.max").write_text(f"{int(cpu_limit * 100000)} 100000")
    return dirs


def remove_groups(dirs: dict[str, Path], wait_s: float = 10.0) -> list[int]:
    """SIGKILL every process left in the groups, then remove them; returns the pids that had to be killed."""
    killed = group_pids(dirs)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    for folder in set(dirs.values()):
        while folder.exists():
            try:
                folder.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    return killed


def create_system_user(name: str, homes: Path) -> None:
    """A system user for a student (no password, home ``homes/name`` with mode 0700), unless it exists."""
    if not USER_NAME.match(name):
        raise ValueError(f"{name!r} cannot be a system user name here: lower-case letters, digits, _ and -, a "
                         "letter first, at most 31 characters")
    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    home = homes / name
    subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", "--user-group",
                    "--comment", "seqlab hub student", name], check=True, capture_output=True)
    os.chmod(home, 0o700)

