"""Start seqlab's hub (hub/jupyterhub_config.py) on loopback for a while, drive it as students do, stop it and
everything it started: what tests/test_hub_smoke.py (make hub-smoke) and scripts/hub_load.py (make hub-load) share.

- ``Hub``: a context manager. It needs root (it creates system users and cgroups). It makes a state folder, a
  clone of the course for the students to pull from (``course_repo``: tests commit "course updates" there),
  starts ``jupyterhub`` with job control of its own (a new session, SIGINT and SIGTERM at their defaults: a hub
  started from a non-interactive script inherits an ignored SIGINT and takes 30 s and more to stop), waits
  for its API, and at the end stops it with SIGTERM and reports what was left behind (``leftovers``) before
  removing it: processes of the students' users or in their cgroups, the cgroups, listening ports. Then it
  deletes the system users it created and the state folder.
- ``Student``: one student's session: the login form (the hub's dummy login, as a browser posts it), the spawn,
  the single-user server's REST API, and kernels through their websocket (``Kernel.run``: one cell, its outputs).
- ``run_notebook``: a kernel runs a notebook's code cells one by one, as a student pressing Shift-Enter does.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import requests
import websocket

import hub_env  # a sibling script (this script's folder is on the path)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "hub"))   # hub/seqlab_cgroups.py, which the hub imports too: hub/ is no package
from seqlab_cgroups import CGROUP_ROOT, cgroup_usage, group_dirs, group_pids, remove_groups  # noqa: E402

HUB_START_TIMEOUT_S = 60
SPAWN_TIMEOUT_S = 120
USER_COMMENT = "seqlab hub student"
LOGS = ROOT / "test-artifacts" / "hub"


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def free_port_block(count: int = 3) -> int:
    """A port p with p .. p+count-1 all free on 127.0.0.1."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count >= 65535:
            continue
        try:
            held = []
            for p in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no block of free ports on 127.0.0.1")


def _listening() -> list[tuple[str, str, str]]:
    """(table, local address:port in hex, socket inode) of every listening TCP socket in /proc/net/tcp{,6}."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            parts = row.split()
            if parts[3] == "0A":                                     # LISTEN
                found.append((table, parts[1], parts[9]))
    return found


def listening_sockets(ports: set[int]) -> list[str]:
    """Lines of /proc/net/tcp{,6} for sockets listening on any of ``ports`` (any address)."""
    return [f"{table}: {local}" for table, local, _ in _listening() if int(local.rsplit(":", 1)[1], 16) in ports]


def listening_beyond_loopback(pids: set[int]) -> list[str]:
    """Listening TCP sockets of ``pids`` bound to an address other than 127.0.0.1 / ::1."""
    inodes = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    return [f"pid {inodes[inode]} listens on {local} ({table})" for table, local, inode in _listening()
            if inode in inodes and local.rsplit(":", 1)[0] not in ("0100007F", "00000000000000000000000001000000")]


def processes_of(uids: set[int]) -> list[tuple[int, int, str]]:
    """(pid, uid, command) of every process owned by one of ``uids``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            if uid in uids:
                found.append((int(entry.name), uid, (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                              .decode(errors="replace")[:200]))
        except OSError:
            continue
    return found


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo.extend(children.get(p, []))
    return found


def start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat): with the pid, it names one process, not a reused pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def still_running(started: dict[int, str | None]) -> list[int]:
    return sorted(pid for pid, when in started.items() if when is not None and start_time(pid) == when)


def free_memory_bytes() -> int:
    for row in Path("/proc/meminfo").read_text().splitlines():
        if row.startswith("MemAvailable:"):
            return int(row.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


@dataclass
class Hub:
    """seqlab's hub on loopback, for a test or a load run (see the module)."""

    cull_timeout: int = 3600
    cull_every: int | None = None
    mem_limit: str = "2G"
    cpu_limit: str = "1"
    prefix: str = field(default_factory=lambda: "sq" + secrets.token_hex(2))
    users: list[str] = field(default_factory=list)
    leftovers: dict[str, list] = field(default_factory=dict)

    def __enter__(self) -> "Hub":
        if not is_root():
            raise PermissionError("seqlab's hub needs root: it creates a system user per student and a cgroup per "
                                  "server (run as root, as CI does: sudo make hub-smoke)")
        if threading.current_thread() is threading.main_thread():
            # a driver stopped with SIGTERM (timeout(1), CI's cancel) still stops its hub on the way out: the hub
            # runs in a session of its own and would otherwise outlive it, with its students' servers
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        self.paths = hub_env.ensure()
        self.state = Path(tempfile.mkdtemp(prefix="seqlab-hub-"))
        self.state.chmod(0o755)                      # the students' users read the course clone and gitconfig here
        (self.state / "home").mkdir(mode=0o755)
        self.password = secrets.token_hex(8)
        self.driver_token = secrets.token_hex(32)
        self.cgroup_parent = f"seqlab-hub-{self.prefix}"
        self.port = free_port_block(3)
        self.url = f"http://127.0.0.1:{self.port}"
        self.course_repo = self.state / "course"
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", f"file://{ROOT}", str(self.course_repo)],
                       check=True)
        subprocess.run(["git", "-C", str(self.course_repo), "checkout", "--quiet", "-B", "course"], check=True)
        self.log_path = self.state / "jupyterhub.log"
        env = {**os.environ,
               "SEQLAB_HUB_STATE": str(self.state), "SEQLAB_HUB_PORT": str(self.port),
               "SEQLAB_HUB_PROXY": self.paths["proxy"], "SEQLAB_HUB_TEST_LOGIN": "1",
               "SEQLAB_HUB_TEST_PASSWORD": self.password, "SEQLAB_HUB_DRIVER_TOKEN": self.driver_token,
               "SEQLAB_HUB_CGROUP": self.cgroup_parent, "SEQLAB_HUB_MEM_LIMIT": self.mem_limit,
               "SEQLAB_HUB_CPU_LIMIT": self.cpu_limit, "SEQLAB_HUB_CULL_TIMEOUT": str(self.cull_timeout),
               "SEQLAB_HUB_COURSE_REPO": f"file://{self.course_repo}", "SEQLAB_HUB_COURSE_BRANCH": "course",
               "SEQLAB_HUB_HOMES": str(self.state / "home"),
               "PATH": f"{Path(self.paths['python']).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        if self.cull_every:
            env["SEQLAB_HUB_CULL_EVERY"] = str(self.cull_every)
        for name in ("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "IPYTHONDIR"):
            env.pop(name, None)

        def own_job():                                 # job control of its own: signals at their defaults
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)

        self.started = time.monotonic()
        with self.log_path.open("wb") as out:
            self.process = subprocess.Popen([self.paths["jupyterhub"], "-f", str(ROOT / "hub" / "jupyterhub_config.py")],
                                            cwd=self.state, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=own_job)
        try:
            self._wait_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.startup_s = time.monotonic() - self.started
        return self

    def _wait_up(self) -> None:
        deadline = time.monotonic() + HUB_START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the hub exited with code {self.process.returncode}; its log:\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}/hub/api/", timeout=5).ok:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the hub did not answer on {self.url} in {HUB_START_TIMEOUT_S} s; its log:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.25)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(method, f"{self.url}/hub/api/{path}", timeout=30,
                                headers={"Authorization": f"token {self.driver_token}"}, **kwargs)

    def user_model(self, name: str) -> dict:
        response = self.api("GET", f"users/{name}")
        response.raise_for_status()
        return response.json()

    def server_ready(self, name: str) -> bool:
        server = self.user_model(name).get("servers", {}).get("")
        return bool(server and server.get("ready"))

    def uids(self) -> set[int]:
        uids = set()
        for name in self.users:
            try:
                uids.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                pass
        return uids

    def hub_pids(self) -> set[int]:
        return descendants(self.process.pid) if self.process.poll() is None else set()

    def server_pids(self, name: str) -> list[int]:
        return group_pids(group_dirs(self.cgroup_parent, name))

    def usage(self, name: str) -> dict | None:
        return cgroup_usage(self.cgroup_parent, name)

    def student(self, index: int) -> "Student":
        name = f"{self.prefix}s{index:02d}"
        if name not in self.users:
            self.users.append(name)
        return Student(self, name)

    def __exit__(self, *exc) -> None:
        """Stop the hub (SIGTERM: it stops the servers and the proxy), record what was left, clean it all up.
        Once: a second call does nothing."""
        if getattr(self, "closed", False):
            return
        self.closed = True
        try:
            self.stop_s = self._stop()
            self.leftovers = self._leftovers()
        finally:
            self._clean_up()

    def _stop(self) -> float:
        started = time.monotonic()
        self.started_pids = {pid: start_time(pid) for pid in self.hub_pids()}   # hub, proxy, services, servers, kernels
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.leftovers.setdefault("hub still running 60 s after SIGTERM", []).append(self.process.pid)
        return time.monotonic() - started

    def _leftovers(self) -> dict[str, list]:
        found: dict[str, list] = dict(self.leftovers)
        time.sleep(1)                                   # processes on their way out
        if self.process.poll() is None:
            found.setdefault("hub process", []).append(self.process.pid)
        try:
            group = os.getpgid(self.process.pid)
            found["processes in the hub's process group"] = [group]
        except ProcessLookupError:
            pass
        alive = still_running(getattr(self, "started_pids", {}))
        if alive:
            found["processes the hub had started"] = alive
        students = processes_of(self.uids())
        if students:
            found["processes of the students' users"] = students
        groups = [str(d) for name in self.users for d in set(group_dirs(self.cgroup_parent, name).values())
                  if d.exists()]
        if groups:
            found["cgroups"] = groups
        ports = listening_sockets({self.port, self.port + 1, self.port + 2})
        if ports:
            found["listening ports"] = ports
        return {k: v for k, v in found.items() if v}

    def _clean_up(self) -> None:
        """Whatever happened: kill what is left (by pid: our hub's group, the students' processes and groups),
        remove the cgroups, delete the users this run created, remove the state folder."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for pid in [*still_running(getattr(self, "started_pids", {})), *(p for p, _, _ in processes_of(self.uids()))]:
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in self.users:
            dirs = group_dirs(self.cgroup_parent, name)
            if any(d.exists() for d in dirs.values()):
                remove_groups({k: d for k, d in dirs.items() if d.exists()})
        for top in {*(CGROUP_ROOT / c / self.cgroup_parent for c in ("memory", "cpu", "cpuacct")),
                    CGROUP_ROOT / self.cgroup_parent}:
            try:
                top.rmdir()
            except OSError:
                pass
        time.sleep(0.5)
        for name in self.users:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            if entry.pw_gecos == USER_COMMENT and entry.pw_dir.startswith(str(self.state)):
                subprocess.run(["userdel", "--remove", name], capture_output=True)
        if self.log_path.exists():                      # the hub's log outlives the state folder, as evidence
            LOGS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.log_path, LOGS / f"jupyterhub-{self.prefix}.log")
            print(f"the hub's log: {(LOGS / f'jupyterhub-{self.prefix}.log').relative_to(ROOT)}")
        shutil.rmtree(self.state, ignore_errors=True)


class SpawnFailed(RuntimeError):
    pass


class Student:
    """One student: logs in with the dummy login form, starts a server, uses its REST API and kernels."""

    def __init__(self, hub: Hub, name: str):
        self.hub, self.name = hub, name
        self.session = requests.Session()
        self.base = f"{hub.url}/user/{name}"

    def log_in(self) -> float:
        """The login form, as a browser posts it (with its _xsrf field); returns seconds."""
        started = time.monotonic()
        form = self.session.get(f"{self.hub.url}/hub/login", timeout=30)
        form.raise_for_status()
        xsrf = re.search(r'name="_xsrf"\s+value="([^"]+)"', form.text)
        data = {"username": self.name, "password": self.hub.password}
        if xsrf:
            data["_xsrf"] = xsrf.group(1)
        response = self.session.post(f"{self.hub.url}/hub/login?next=", data=data, timeout=30, allow_redirects=False)
        if response.status_code not in (302, 303):
            raise RuntimeError(f"{self.name}: login answered {response.status_code}: {response.text[:300]}")
        return time.monotonic() - started

    def spawn(self, timeout_s: float = SPAWN_TIMEOUT_S) -> float:
        """Start the server (the hub's spawn page, as a browser opens it after logging in) and wait until it is
        ready; returns seconds."""
        started = time.monotonic()
        response = self.session.get(f"{self.hub.url}/hub/spawn/{self.name}", timeout=60, allow_redirects=False)
        if response.status_code >= 400:
            raise RuntimeError(f"{self.name}: spawn answered {response.status_code}: {response.text[:300]}")
        self.wait_ready(timeout_s, started)
        return time.monotonic() - started

    def wait_ready(self, timeout_s: float, started: float | None = None) -> None:
        started = started or time.monotonic()
        while True:
            server = self.hub.user_model(self.name).get("servers", {}).get("")
            if server and server.get("ready"):
                return
            if not server and time.monotonic() - started > 5:
                raise SpawnFailed(f"{self.name}: the hub gave up starting the server (its log says why: "
                                  "typically that it never answered within the hub's http_timeout)")
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"{self.name}'s server not ready after {timeout_s:g} s; the hub's log:\n"
                                   f"{self.hub.log_tail()}")
            time.sleep(0.25)

    def stop_server(self, timeout_s: float = 60) -> None:
        self.hub.api("DELETE", f"users/{self.name}/server").raise_for_status()
        deadline = time.monotonic() + timeout_s
        while self.hub.user_model(self.name).get("servers", {}).get(""):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}'s server still there {timeout_s} s after the stop")
            time.sleep(0.25)

    def start_server(self, timeout_s: float = SPAWN_TIMEOUT_S) -> float:
        started = time.monotonic()
        response = self.hub.api("POST", f"users/{self.name}/server")
        if response.status_code not in (201, 202):
            raise RuntimeError(f"{self.name}: start answered {response.status_code}: {response.text[:300]}")
        self.wait_ready(timeout_s, started)
        return time.monotonic() - started

    def server_api(self, method: str, path: str, **kwargs) -> requests.Response:
        """The single-user server's REST API, with the driver's token (its admin role includes access:servers)."""
        return requests.request(method, f"{self.base}/api/{path}", timeout=60,
                                headers={"Authorization": f"token {self.hub.driver_token}"}, **kwargs)

    def contents(self, path: str) -> dict:
        response = self.server_api("GET", f"contents/{path}")
        response.raise_for_status()
        return response.json()

    def start_kernel(self, notebook: str) -> "Kernel":
        """A session for ``notebook`` (its kernel starts in the notebook's folder, as JupyterLab's does)."""
        response = self.server_api("POST", "sessions", json={"path": notebook, "type": "notebook",
                                                             "name": Path(notebook).name,
                                                             "kernel": {"name": "python3"}})
        response.raise_for_status()
        return Kernel(self, response.json()["kernel"]["id"], response.json()["id"])


def decode(frame: str | bytes) -> dict:
    """A kernel message from the websocket: JSON text, or the binary form of a message with buffers (a widget's
    picture): a count n, n offsets (32-bit big-endian), the JSON message at the first offset, then the buffers."""
    if isinstance(frame, str):
        return json.loads(frame)
    count = int.from_bytes(frame[:4], "big")
    offsets = [int.from_bytes(frame[4 + 4 * i: 8 + 4 * i], "big") for i in range(count)]
    end = offsets[1] if count > 1 else len(frame)
    return json.loads(frame[offsets[0]:end].decode("utf-8"))


class KernelDied(RuntimeError):
    pass


class Kernel:
    """A kernel of a student's server, driven through its websocket (the Jupyter messaging protocol, as JSON)."""

    def __init__(self, student: Student, kernel_id: str, session_id: str):
        self.student, self.id, self.session_id = student, kernel_id, session_id
        ws_url = student.base.replace("http://", "ws://") + f"/api/kernels/{kernel_id}/channels"
        self.ws = websocket.create_connection(ws_url, timeout=120,      # a busy server may take its time
                                              header=[f"Authorization: token {student.hub.driver_token}"])
        self.client_session = uuid.uuid4().hex

    def receive(self, timeout_s: float) -> dict | None:
        """The next kernel message, or None after at most ``min(timeout_s, 5)`` seconds or a control frame. The
        server pings every 30 s: a plain ``recv()`` answers pings inside itself and never returns while they come
        more often than its timeout, so control frames come back here and every wait stays bounded."""
        self.ws.settimeout(max(0.05, min(timeout_s, 5)))
        try:
            opcode, data = self.ws.recv_data(control_frame=True)
        except websocket.WebSocketTimeoutException:
            return None
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            raise KernelDied("the server closed the kernel's websocket")
        if opcode == websocket.ABNF.OPCODE_TEXT:
            return decode(data.decode("utf-8"))
        if opcode == websocket.ABNF.OPCODE_BINARY:
            return decode(data)
        return None

    def run(self, code: str, timeout_s: float = 300) -> dict:
        """Run one cell; returns {"status", "stdout", "stderr", "error", "seconds"}. Raises KernelDied when the
        kernel restarts or dies before answering."""
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": self.student.name, "session": self.client_session,
                       "msg_type": "execute_request", "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        started = time.monotonic()
        result = {"status": None, "stdout": "", "stderr": "", "error": None}
        idle = False
        while not (idle and result["status"]):
            remaining = timeout_s - (time.monotonic() - started)
            if remaining <= 0:
                raise TimeoutError(f"a cell did not finish in {timeout_s} s: {code[:80]!r}")
            message = self.receive(remaining)
            if message is None:
                continue
            msg_type, content = message.get("msg_type") or message["header"]["msg_type"], message.get("content", {})
            if msg_type == "status" and content.get("execution_state") in ("restarting", "dead"):
                raise KernelDied(f"the kernel {content['execution_state']} while running {code[:80]!r}")
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg_type == "stream":
                result[content["name"]] += content["text"]
            elif msg_type == "error":
                result["error"] = f"{content['ename']}: {content['evalue']}"
            elif msg_type == "execute_reply":
                result["status"] = content["status"]
                if content["status"] == "error" and not result["error"]:
                    result["error"] = f"{content.get('ename')}: {content.get('evalue')}"
            elif msg_type == "status" and content.get("execution_state") == "idle":
                idle = True
        result["seconds"] = time.monotonic() - started
        return result

    def wait_restarted(self, timeout_s: float = 60) -> None:
        """After a death: wait until the server reports the restarted kernel idle (its REST API)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            response = self.student.server_api("GET", f"kernels/{self.id}")
            if response.ok and response.json().get("execution_state") == "idle":
                return
            time.sleep(0.5)
        raise TimeoutError(f"the restarted kernel was not idle within {timeout_s} s")

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.student.server_api("DELETE", f"sessions/{self.session_id}")


def code_cells(notebook: Path) -> list[str]:
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def run_notebook(kernel: Kernel, cells: list[str], what: str, timeout_s: float = 300) -> float:
    """Run ``cells`` one by one; fails on the first error, saying which cell; returns seconds."""
    started = time.monotonic()
    for index, code in enumerate(cells):
        result = kernel.run(code, timeout_s)
        if result["status"] != "ok":
            raise AssertionError(f"{what}: code cell {index} failed: {result['error']}\n{result['stderr'][-2000:]}")
    return time.monotonic() - started
