"""seqlab's JupyterHub on one machine, everything on loopback (127.0.0.1): the configuration that make hub-smoke and
make hub-load start (scripts/hub_run.py starts it as root: ``jupyterhub -f hub/jupyterhub_config.py``).

What it sets, read from the environment (scripts/hub_run.py fills it in):

- the proxy (configurable-http-proxy from hub/package-lock.json) on ``127.0.0.1:$SEQLAB_HUB_PORT``, its API and
  the hub's own port on loopback too: nothing listens beyond 127.0.0.1;
- ``CourseSpawner`` (hub/seqlab_hub.py): each student a system user, each server in a cgroup with
  ``$SEQLAB_HUB_MEM_LIMIT`` of memory (default 2G: notebooks' kernels peak at 0.3-1.0 GiB, the server itself
  takes about 0.13) and ``$SEQLAB_HUB_CPU_LIMIT`` cores (default 1), which also sets the kernels' thread count
  (hub/start.py);
- the start step (hub/start.py): the course pulled into ``~/seqlab`` with nbgitpuller from
  ``$SEQLAB_HUB_COURSE_REPO`` (a git URL or path; ``$SEQLAB_HUB_COURSE_BRANCH``), new notebooks copied into ``~/work``
  (never over a student's copy); JupyterLab opens on ``work/``;
- the idle culler (jupyterhub-idle-culler, a hub-managed service): a server idle for ``$SEQLAB_HUB_CULL_TIMEOUT``
  seconds (default 3600) is stopped. The server reports its activity, and the hub reads the proxy's, at an
  interval well below the timeout (a quarter of it, at most 300 s): with the default intervals (300 s) a short
  timeout culls a student who is running a cell every few seconds (jupyterhub#1498);
- the login: JupyterHub's dummy authenticator (any user name, one shared password) only when
  ``$SEQLAB_HUB_TEST_LOGIN=1``, for the tests, which must not need an identity provider. A hub for a real class
  uses the university's login: OAuthenticator (GitHub, Google, Azure AD, generic OIDC) or LTIAuthenticator from the
  course's LMS; see README, "A class on a hub". Without either this configuration refuses to start.
"""

import os
import secrets
import sys
from pathlib import Path

HUB = Path(__file__).resolve().parent
ROOT = HUB.parent
sys.path.insert(0, str(HUB))   # seqlab_hub.py, beside this file: JupyterHub execs a config without its folder

c = get_config()  # noqa: F821 (JupyterHub defines it)

state = Path(os.environ["SEQLAB_HUB_STATE"])
port = int(os.environ.get("SEQLAB_HUB_PORT", "8000"))
env_bin = Path(sys.executable).parent

# -- everything on loopback --------------------------------------------------------------------------------------
c.JupyterHub.bind_url = f"http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{int(os.environ.get('SEQLAB_HUB_API_PORT', port + 1))}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{int(os.environ.get('SEQLAB_HUB_PROXY_API_PORT', port + 2))}"
c.ConfigurableHTTPProxy.command = [os.environ.get("SEQLAB_HUB_PROXY", "configurable-http-proxy")]
c.ConfigurableHTTPProxy.should_start = True
c.ConfigurableHTTPProxy.auth_token = secrets.token_hex(32)
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True          # the hub stops every student's server when it stops
c.JupyterHub.cleanup_proxy = True
c.JupyterHub.log_datefmt = "%H:%M:%S"

# -- the students' servers ---------------------------------------------------------------------------------------
from seqlab_hub import CourseSpawner  # noqa: E402

c.JupyterHub.spawner_class = CourseSpawner
c.CourseSpawner.ip = "127.0.0.1"
c.CourseSpawner.create_users = os.environ.get("SEQLAB_HUB_CREATE_USERS", "1") == "1"
c.CourseSpawner.homes = os.environ.get("SEQLAB_HUB_HOMES", str(state / "home"))
c.CourseSpawner.cgroup_parent = os.environ.get("SEQLAB_HUB_CGROUP", "seqlab-hub")
c.CourseSpawner.report_file = str(state / "servers.jsonl")
c.CourseSpawner.mem_limit = os.environ.get("SEQLAB_HUB_MEM_LIMIT", "2G")
c.CourseSpawner.cpu_limit = float(os.environ.get("SEQLAB_HUB_CPU_LIMIT", "1"))
c.CourseSpawner.cmd = [sys.executable, str(HUB / "start.py"), str(env_bin / "jupyterhub-singleuser")]
c.CourseSpawner.default_url = "/lab/tree/work"
# make hub-load N=16 on a loaded 2-core machine: servers took up to 115 s to answer, one more than 120 s (the hub
# gave up on it): a class arriving at once needs more than JupyterHub's defaults (60 s and 30 s)
c.CourseSpawner.start_timeout = 300
c.CourseSpawner.http_timeout = 300
c.CourseSpawner.args = ["--ServerApp.ip=127.0.0.1"]
if os.environ.get("SEQLAB_HUB_TEST_LOGIN") == "1":
    c.CourseSpawner.args.append("--LabApp.expose_app_in_browser=True")   # the browser tests read window.jupyterapp

cull_timeout = int(os.environ.get("SEQLAB_HUB_CULL_TIMEOUT", "3600"))
activity_interval = max(1, min(300, cull_timeout // 4))
c.JupyterHub.last_activity_interval = activity_interval
course_repo = os.environ.get("SEQLAB_HUB_COURSE_REPO", f"file://{ROOT}")
git_config = state / "gitconfig"
c.CourseSpawner.environment = {
    "PATH": f"{env_bin}:/usr/local/bin:/usr/bin:/bin",
    "JUPYTERHUB_ACTIVITY_INTERVAL": str(activity_interval),
    "SEQLAB_COURSE_REPO": course_repo,
    "SEQLAB_COURSE_BRANCH": os.environ.get("SEQLAB_HUB_COURSE_BRANCH", "main"),
    # git refuses a repository owned by another user ("dubious ownership") unless safe.directory names it in a
    # global config file: this one names the course's repository and includes the student's own ~/.gitconfig
    "GIT_CONFIG_GLOBAL": str(git_config),
}
course_path = course_repo.removeprefix("file://")
git_config.write_text(f"[safe]\n\tdirectory = {course_path}\n\tdirectory = {course_path}/.git\n"   # bare or not
                      "[include]\n\tpath = ~/.gitconfig\n")
git_config.chmod(0o644)

# -- the idle culler ---------------------------------------------------------------------------------------------
cull_every = int(os.environ.get("SEQLAB_HUB_CULL_EVERY", str(max(1, min(300, cull_timeout // 4)))))
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={cull_timeout}",
                f"--cull-every={cull_every}", "--concurrency=4"],
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]

# -- the driver of the tests and of make hub-load: a service with the admin role (its token from the environment) --
driver_token = os.environ.get("SEQLAB_HUB_DRIVER_TOKEN")
if driver_token:
    c.JupyterHub.services.append({"name": "seqlab-driver", "api_token": driver_token})
    c.JupyterHub.load_roles.append({"name": "admin", "services": ["seqlab-driver"]})

# -- the login ---------------------------------------------------------------------------------------------------
if os.environ.get("SEQLAB_HUB_TEST_LOGIN") == "1":
    # tests only: any user name, one shared password from the environment; never for a class
    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = os.environ["SEQLAB_HUB_TEST_PASSWORD"]
    c.Authenticator.allow_all = True
elif not os.environ.get("SEQLAB_HUB_AUTH_CONFIG"):
    raise SystemExit("seqlab hub: no login configured. For the tests set SEQLAB_HUB_TEST_LOGIN=1 (dummy login); "
                     "for a class set SEQLAB_HUB_AUTH_CONFIG to a file that configures OAuthenticator or "
                     "LTIAuthenticator (README: A class on a hub)")
else:
    load_subconfig(os.environ["SEQLAB_HUB_AUTH_CONFIG"])  # noqa: F821 (JupyterHub defines it)
