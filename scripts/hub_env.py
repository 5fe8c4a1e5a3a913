#!/usr/bin/env python3
"""The environment of seqlab's hub on one machine (hub/), built beside the checkout in ``.cache/hub/``.

    python3 scripts/hub_env.py          # build it if needed (make hub-smoke and make hub-load do it first)

What it holds, and why it is not the course's own ``.venv``:

- ``venv/``: the course's run dependencies (pyproject.toml's ``dependencies``, no test or site extra) plus the
  ``hub`` extra (jupyterhub at the hub's version, nbgitpuller, jupyter-resource-usage, the idle culler), the
  packages course.py installs without their dependencies, and seqlab (editable, from this checkout). The hub,
  every student's single-user server and every kernel run from it. The students' servers run as their own
  system users, so this Python must be readable by them: a virtual environment made from a Python under a 0700
  home (pyenv under /root, for example) cannot start for them, or silently loads another libpython. So it is
  made from the first Python 3.11+ whose installation every user can read, and the build stops, saying so,
  when there is none, or when the checkout itself is not readable by other users.
- ``npm/``: configurable-http-proxy, pinned in hub/package-lock.json, installed with ``npm ci``.
- in the venv, ``etc/ipython/ipython_kernel_config.py``: every kernel runs hub/memory_notice.py at start, so a
  student whose kernel was killed for memory is told so in the next cell's output (binder/postBuild does the
  same in the image), and JupyterLab's overrides (no news, no update check), as course.py lab writes them.

Standard library only. A fingerprint (pyproject.toml, the lock file, the Python) skips a rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # course.py and testbed.py, at the root (this runs on the system Python)
import course  # noqa: E402  (NO_DEPS_PACKAGES: the same as the students' own set-up)
from testbed import package_module  # noqa: E402

LAB_OVERRIDES = package_module("notebook_rules").LAB_OVERRIDES      # as course.py lab writes them

HUB_CACHE = ROOT / ".cache" / "hub"
VENV = HUB_CACHE / "venv"
NPM = HUB_CACHE / "npm"
STAMP = HUB_CACHE / "stamp.json"
PIP_LOG = HUB_CACHE / "pip.log"
LOCK = ROOT / "hub" / "package-lock.json"
CANDIDATE_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/usr/bin/python3.12", "/usr/bin/python3.11")
KERNEL_CONFIG = """# written by scripts/hub_env.py: every kernel of the hub runs the memory notice at start
c.IPKernelApp.exec_files = [{notice!r}]
"""


def log(message: str) -> None:
    print(f"[hub-env] {message}", flush=True)


def readable_by_all(path: Path) -> str | None:
    """None when every user can reach and read ``path``; else the first folder or file that stops them."""
    path = Path(path).resolve()
    for part in [*reversed(path.parents), path]:
        mode = part.stat().st_mode
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return f"{part} (mode {stat.filemode(mode)}: other users cannot enter it)"
        if not stat.S_ISDIR(mode) and not mode & stat.S_IROTH:
            return f"{part} (mode {stat.filemode(mode)}: other users cannot read it)"
    return None


def python_for_everyone() -> tuple[str, str]:
    """(a Python 3.11+ that every user can run, the reason each earlier candidate was refused)."""
    refused = []
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for candidate in (str(base), *CANDIDATE_PYTHONS):
        if not Path(candidate).exists():
            continue
        probe = subprocess.run([candidate, "-c", "import json, sys, sysconfig, venv, ensurepip; print(json.dumps("
                                "[sys.version_info[:2], sys.base_prefix, sysconfig.get_config_var('LIBDIR') or ''"
                                ", sys.executable]))"], capture_output=True, text=True)
        if probe.returncode != 0:
            refused.append(f"{candidate}: cannot make a virtual environment (no venv/ensurepip)")
            continue
        version, prefix, libdir, executable = json.loads(probe.stdout)
        if tuple(version) < (3, 11):
            refused.append(f"{candidate}: Python {version[0]}.{version[1]}, older than 3.11")
            continue
        blocked = next(filter(None, (readable_by_all(Path(p)) for p in (executable, prefix, libdir) if p)), None)
        if blocked:
            refused.append(f"{candidate}: {blocked}")
            continue
        return executable, "; ".join(refused)
    raise SystemExit("[hub-env] no Python 3.11+ that the students' system users can run: "
                     + ("; ".join(refused) or "none found") + ". Install one system-wide (Debian: apt-get install "
                     "python3 python3-venv) and run this again.")


def fingerprint(python: str) -> str:
    h = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    h.update(LOCK.read_bytes())
    h.update(json.dumps([course.NO_DEPS_PACKAGES, python, LAB_OVERRIDES]).encode())
    return h.hexdigest()


def pip(args: list[str]) -> None:
    with PIP_LOG.open("a") as out:
        out.write("$ pip " + " ".join(args) + "\n")
        out.flush()
        code = subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", *args], stdout=out,
                              stderr=subprocess.STDOUT).returncode
    if code:
        tail = "\n".join(PIP_LOG.read_text().splitlines()[-25:])
        raise SystemExit(f"{tail}\n[hub-env] pip {' '.join(args)} failed (exit {code}); full log: {PIP_LOG}")


def npm_ci() -> Path:
    proxy = NPM / "node_modules" / ".bin" / "configurable-http-proxy"
    if proxy.exists() and (NPM / "package-lock.json").exists() and (NPM / "package-lock.json").read_bytes() == LOCK.read_bytes():
        return proxy
    npm = shutil.which("npm")
    apt_get = shutil.which("apt-get")
    if npm is None and apt_get and os.geteuid() == 0:          # as course.npm_packages does (CI runs as root)
        log("installing Node.js's npm for the hub's proxy: apt-get install -y " + " ".join(course.NPM_DEBIAN_PACKAGES))
        subprocess.run([apt_get, "install", "-y", "-q", *course.NPM_DEBIAN_PACKAGES], stdout=subprocess.DEVNULL,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("[hub-env] no npm: the hub's proxy (configurable-http-proxy) is an npm package; install "
                         "Node.js 20+ and npm (Debian: apt-get install -y nodejs npm)")
    NPM.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "hub" / "package.json", NPM / "package.json")
    shutil.copy2(LOCK, NPM / "package-lock.json")
    log(f"npm ci in {NPM.relative_to(ROOT)} (configurable-http-proxy, pinned in hub/package-lock.json)")
    if subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NPM).returncode:
        (NPM / "package-lock.json").unlink(missing_ok=True)
        raise SystemExit("[hub-env] npm ci failed for hub/package-lock.json")
    return proxy


def ensure() -> dict[str, str]:
    """Build what is missing; return the paths the hub's scripts need (python, jupyterhub, proxy)."""
    blocked = readable_by_all(ROOT)
    if blocked:
        raise SystemExit(f"[hub-env] the checkout {ROOT} is not readable by other users: {blocked}. The students' "
                         "servers run as their own system users and import seqlab from it; clone the course where "
                         "every user can read it (for example under /srv or /opt).")
    python, refused = python_for_everyone()
    HUB_CACHE.mkdir(parents=True, exist_ok=True)
    os.chmod(HUB_CACHE, 0o755)
    print_ = fingerprint(python)
    if not (STAMP.exists() and json.loads(STAMP.read_text()).get("fingerprint") == print_
            and (VENV / "bin" / "jupyterhub").exists()):
        if refused:
            log(f"not using {refused}")
        log(f"building the hub's environment {VENV.relative_to(ROOT)} from {python} (pip's output: "
            f"{PIP_LOG.relative_to(ROOT)})")
        shutil.rmtree(VENV, ignore_errors=True)
        PIP_LOG.write_text("")
        subprocess.run([python, "-m", "venv", str(VENV)], check=True)
        pip(["install", "--upgrade", "pip"])
        pip(["install", "--editable", f"{ROOT}[hub]"])
        pip(["install", "--no-deps", *course.NO_DEPS_PACKAGES])
        config = VENV / "etc" / "ipython"
        config.mkdir(parents=True, exist_ok=True)
        (config / "ipython_kernel_config.py").write_text(
            KERNEL_CONFIG.format(notice=str(ROOT / "hub" / "memory_notice.py")))
        settings = VENV / "share" / "jupyter" / "lab" / "settings"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "overrides.json").write_text(json.dumps(LAB_OVERRIDES, indent=1))
        STAMP.write_text(json.dumps({"fingerprint": print_, "python": python}))
    proxy = npm_ci()
    return {"python": str(VENV / "bin" / "python"), "jupyterhub": str(VENV / "bin" / "jupyterhub"),
            "proxy": str(proxy), "venv": str(VENV)}


if __name__ == "__main__":
    paths = ensure()
    log("ready: " + ", ".join(f"{k}={v}" for k, v in paths.items()))
