"""Run by every kernel of the hub at start (IPKernelApp.exec_files): tells a student that the last kernel was killed
for memory, in the output of the next cell they run.

On a hub each student's server runs in its own memory cgroup (hub/seqlab_hub.py; on Kubernetes the pod's limit).
Over the limit the kernel, the largest process in it, is killed, and JupyterLab only says that the kernel "appears
to have died" and restarts it. The cgroup counts its OOM kills (v1: ``oom_kill`` in memory.oom_control, v2: in
memory.events); this compares the count with the one the student's kernels last saw (kept in
``~/.cache/seqlab/oom-kills-seen``) and, when it went up, prints what happened, the limit and what to do, once.
Outside a memory limit (a laptop) it does nothing. Everything is inside a function: the student's namespace gets
no names from it.
"""


def _seqlab_memory_notice():
    import os
    import sys
    from pathlib import Path

    def cgroup_files():
        """(the file with the OOM kill count, the file with the limit, the key of the count) of this process's
        memory cgroup, or None."""
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):            # cgroup v1
                base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
                return base / "memory.oom_control", base / "memory.limit_in_bytes"
        for line in lines:
            if line.startswith("0::"):                         # cgroup v2
                base = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
                return base / "memory.events", base / "memory.max"
        return None

    def read_count(path):
        try:
            for row in path.read_text().splitlines():
                key, _, value = row.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            return None
        return None

    found = cgroup_files()
    if found is None:
        return
    events, limit_file = found
    count = read_count(events)
    if count is None:
        return
    seen_file = Path(os.path.expanduser("~/.cache/seqlab/oom-kills-seen"))
    try:
        seen = int(seen_file.read_text().split()[0]) if seen_file.exists() else 0
    except (OSError, ValueError, IndexError):
        seen = 0
    try:
        seen_file.parent.mkdir(parents=True, exist_ok=True)
        seen_file.write_text(f"{count}\n")
    except OSError:
        pass
    if count <= seen:
        return
    try:
        raw = limit_file.read_text().strip()
        limit = "its limit" if raw == "max" or int(raw) > 1 << 60 else f"its limit of {int(raw) / 2**30:.1f} GiB"
    except (OSError, ValueError):
        limit = "its limit"
    message = (f"seqlab: your previous kernel was stopped because your server ran out of memory: it reached "
               f"{limit} and the system killed the kernel, the largest process in it ({count - seen} time(s) "
               "since you last saw this). Your notebook file is as you last saved it, but the kernel's variables "
               "are gone: run the notebook's cells again from the top. If it "
               "happens again, close the other notebooks' kernels (Kernel > Shut Down All Kernels, then reopen "
               "this one) and use smaller sizes, or ask your instructor about the memory limit.")

    shown = []

    def notice(*args, **kwargs):
        if not shown:
            shown.append(True)
            print(message, file=sys.stderr, flush=True)

    try:
        get_ipython().events.register("pre_run_cell", notice)   # noqa: F821 (defined in a kernel)
    except NameError:
        print(message, file=sys.stderr, flush=True)


_seqlab_memory_notice()
del _seqlab_memory_notice
