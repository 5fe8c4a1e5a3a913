"""The spawner of seqlab's hub on one machine: a LocalProcessSpawner whose students are system users, each
server in its own memory and CPU cgroup.

JupyterHub's LocalProcessSpawner runs each server as the student's system user but ignores ``mem_limit`` and
``cpu_limit``. ``CourseSpawner`` (run by a hub started as root):

- creates the student's system user on the first start when ``create_users`` is on (home under ``homes``, mode
  0700, no password: the hub's authenticator is the only way in);
- makes a cgroup per student under ``cgroup_parent`` (v1: the memory and cpu hierarchies; v2: one group with both
  controllers) with the memory limit (``mem_limit``) and the CPU quota (``cpu_limit``), and moves the server's
  process into it in the forked child *before* it drops root, so the server and every kernel it starts are
  inside: over the limit the kernel (the largest process) is the one killed, and only that student's;
- on stop, kills what is left in the student's group (a kernel the server left behind), records the group's
  peak memory, OOM kills and CPU seconds in ``report_file`` (one JSON line per stop) and removes the group.

``cgroup_usage(name)`` reads the same figures from a running student's group (make hub-load prints them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Bool, Unicode

from seqlab_cgroups import cgroup_usage, create_system_user, group_dirs, make_groups, remove_groups


class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner + a system user per student + a memory and CPU cgroup per server (see the module)."""

    create_users = Bool(False, config=True, help="Create a missing system user for a student (useradd).")
    homes = Unicode("/home", config=True, help="Where created users' homes go.")
    cgroup_parent = Unicode("seqlab-hub", config=True, help="The cgroup under which each student gets a group.")
    report_file = Unicode("", config=True, help="JSON lines: each stopped server's peak memory, OOM kills, CPU.")

    def _dirs(self) -> dict[str, Path]:
        return group_dirs(self.cgroup_parent, self.user.name)

    async def start(self):
        if self.create_users:
            create_system_user(self.user.name, Path(self.homes))
        dirs = make_groups(self.cgroup_parent, self.user.name, self.mem_limit, self.cpu_limit)
        self.log.info("seqlab: %s's server in cgroup %s (memory limit %s bytes, CPU limit %s)", self.user.name,
                      dirs["memory"], self.mem_limit, self.cpu_limit)
        return await super().start()

    def make_preexec_fn(self, name):
        drop_privileges = super().make_preexec_fn(name)
        procs = [str(folder / "cgroup.procs") for folder in set(self._dirs().values())]

        def preexec():
            # in the forked child, still root: join the student's groups, then become the student
            for path in procs:
                with open(path, "w") as f:
                    f.write(str(os.getpid()))
            drop_privileges()

        return preexec

    async def stop(self, now=False):
        await super().stop(now=now)
        dirs = self._dirs()
        usage = cgroup_usage(self.cgroup_parent, self.user.name)
        killed = remove_groups(dirs) if dirs["memory"].exists() else []
        if usage is not None:
            usage = {"user": self.user.name, "stopped_at": time.time(), "killed_leftovers": killed, **usage}
            self.log.info("seqlab: %s's server stopped: %s", self.user.name, json.dumps(usage))
            if self.report_file:
                with open(self.report_file, "a") as out:
                    out.write(json.dumps(usage) + "\n")
