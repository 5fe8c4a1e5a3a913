"""The hub's image and configuration, checked offline (make test): what can be checked without root, a container
runtime or a cluster.

- binder/ (the image repo2docker builds for a hub): its pins are pyproject.toml's run dependencies plus the hub
  extra, exactly (no test or site package); postBuild installs what course.py installs without dependencies;
  the start script runs hub/start.py;
- hub/start.py (the start step): new notebooks copied into ~/work with course.py's rule (a student's copy is never
  overwritten), the thread count from the CPU limit ($CPU_LIMIT, else the cgroup's quota, v1 and v2), and the
  command run after it with that environment;
- hub/jupyterhub_config.py, evaluated with a stand-in spawner module (jupyterhub itself is not in the students'
  environment): every address on 127.0.0.1, the activity intervals below the culler's timeout, no login without
  the test flag or a real authenticator's file;
- hub/k8s/values.yaml merged into the Zero to JupyterHub chart's defaults as helm does and validated against the
  chart's schema (both vendored from the chart, hub/k8s/chart/README.md); its memory limit equal to the local hub's;
  hub/k8s/hub.Dockerfile's jupyterhub equal to the students';
- ``course.py hub-link``: the nbgitpuller link's fields.

NOT run here: the image build (repo2docker), helm's template rendering, KubeSpawner's pod spec and any cluster.
The hub itself, with real users, cgroups, kernels and Chromium, is make hub-smoke (tests/test_hub_smoke.py).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

import course

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("seqlab_hub_start", ROOT / "hub" / "start.py")
start = importlib.util.module_from_spec(_spec)           # hub/start.py, under a name no other module has
_spec.loader.exec_module(start)


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for requirement in requirements:
        name, sep, version = requirement.partition("==")
        assert sep, f"{requirement!r} is not pinned with =="
        pins[name.lower()] = version
    return pins


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_image_has_the_run_dependencies_and_the_hub_extra_with_pyprojects_pins():
    project = _project()
    expected = _pins(project["dependencies"] + project["optional-dependencies"]["hub"])
    env = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert _pins([line for line in pip_section if not line.startswith("-")]) == expected
    extras = {name for group in ("test", "site") for name in _pins(project["optional-dependencies"][group])}
    assert not extras & set(expected), "a test or site package in the hub's image"
    assert "jupyterhub" in expected and "nbgitpuller" in expected and "jupyter-resource-usage" in expected


def test_the_hub_extra_stays_out_of_the_students_own_install():
    setup_source = Path(course.__file__).read_text()
    assert '[test,site]' in setup_source and "[hub]" not in setup_source.split("def setup()", 1)[1].split("def ", 1)[0]


def test_postbuild_installs_the_packages_without_dependencies_and_the_start_script_runs_the_start_step():
    post_build = (ROOT / "binder" / "postBuild").read_text()
    for package in course.NO_DEPS_PACKAGES:
        assert f"--no-deps {package}" in post_build
    assert "ipython_kernel_config.py" in post_build and "memory_notice.py" in post_build
    start_script = ROOT / "binder" / "start"
    assert os.access(start_script, os.X_OK) and os.access(ROOT / "binder" / "postBuild", os.X_OK)
    assert 'hub/start.py" "$@"' in start_script.read_text()
    for name in ("course.py", "testbed.py", "lib", "data", "notebooks", "hub"):
        assert f" {name}" in post_build.split("cp -r", 1)[1].splitlines()[0], f"postBuild does not copy {name}"


@pytest.mark.parametrize("environ, cores, threads", [
    ({"CPU_LIMIT": "1"}, 8, 1), ({"CPU_LIMIT": "2.5"}, 8, 2), ({"CPU_LIMIT": "0.5"}, 8, 1),
    ({"CPU_LIMIT": "16"}, 4, 4)])
def test_threads_follow_the_cpu_limit(environ, cores, threads):
    assert start.thread_count(environ, cores) == threads
    env = start.thread_environment({**environ, "MKL_NUM_THREADS": "3"}, cores)
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == str(threads)
    assert env["MKL_NUM_THREADS"] == "3", "a thread count set by hand is left as it is"


def test_the_cpu_limit_is_read_from_a_v1_or_v2_cgroup(tmp_path):
    v1 = tmp_path / "v1"
    (v1 / "cpu" / "seqlab-hub" / "ann").mkdir(parents=True)
    (v1 / "cpu" / "seqlab-hub" / "ann" / "cpu.cfs_quota_us").write_text("150000\n")
    (v1 / "cpu" / "seqlab-hub" / "ann" / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "cgroup-v1"
    proc.write_text("4:memory:/seqlab-hub/ann\n2:cpuacct:/seqlab-hub/ann\n1:cpu:/seqlab-hub/ann\n0::/\n")
    assert start.cgroup_cpu_limit(proc, v1) == 1.5
    (v1 / "cpu" / "seqlab-hub" / "ann" / "cpu.cfs_quota_us").write_text("-1\n")
    assert start.cgroup_cpu_limit(proc, v1) is None
    v2 = tmp_path / "v2"
    (v2 / "seqlab-hub" / "bob").mkdir(parents=True)
    (v2 / "seqlab-hub" / "bob" / "cpu.max").write_text("200000 100000\n")
    proc2 = tmp_path / "cgroup-v2"
    proc2.write_text("0::/seqlab-hub/bob\n")
    assert start.cgroup_cpu_limit(proc2, v2) == 2.0
    (v2 / "seqlab-hub" / "bob" / "cpu.max").write_text("max 100000\n")
    assert start.cgroup_cpu_limit(proc2, v2) is None


def _notebook(text: str) -> str:
    return json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": text}], "metadata": {},
                       "nbformat": 4, "nbformat_minor": 5})


def _start_step(home: Path, command: list[str]) -> subprocess.CompletedProcess:
    # env-key: the test's own environment for hub/start.py, less the variables this test decides
    env = {k: v for k, v in os.environ.items() if k not in start.THREAD_VARIABLES and k != "SEQLAB_COURSE_REPO"}
    env.update({"HOME": str(home), "CPU_LIMIT": "1"})
    return subprocess.run([sys.executable, str(ROOT / "hub" / "start.py"), *command], env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_start_step_copies_new_notebooks_never_over_a_students_copy_then_runs_the_server(tmp_path):
    home = tmp_path / "home"
    course_notebooks = home / "seqlab" / "notebooks"          # where nbgitpuller (or the link) put the course
    course_notebooks.mkdir(parents=True)
    (course_notebooks / "01-a.ipynb").write_text(_notebook("course version 1"))
    probe = [sys.executable, "-c", "import os; print('threads', os.environ['OMP_NUM_THREADS'])"]
    first = _start_step(home, probe)
    assert first.returncode == 0, first.stderr
    assert "threads 1" in first.stdout, "the command after the start step did not get the thread count"
    mine = home / "work" / "01-a.ipynb"
    assert "course version 1" in mine.read_text()

    mine.write_text(_notebook("the student's own edit"))
    (course_notebooks / "01-a.ipynb").write_text(_notebook("course version 2"))
    (course_notebooks / "02-b.ipynb").write_text(_notebook("a new notebook"))
    second = _start_step(home, probe)
    assert second.returncode == 0, second.stderr
    assert "the student's own edit" in mine.read_text(), "the start step overwrote the student's copy"
    assert "a new notebook" in (home / "work" / "02-b.ipynb").read_text()
    assert "01-a.ipynb has changed" in second.stderr, "the start step did not say that the course's version changed"


# -- the hub's configuration ------------------------------------------------------------------------------------

def _hub_config(tmp_path: Path, **environ: str):
    """hub/jupyterhub_config.py evaluated as JupyterHub does, with a stand-in for seqlab_hub's spawner."""
    from traitlets.config import Config

    config = Config()
    fake = types.ModuleType("seqlab_hub")
    fake.CourseSpawner = type("CourseSpawner", (), {})
    # env-key: saves the variables the caller sets (the hub's, CONTRIBUTING §1), restored below
    saved = {k: os.environ.get(k) for k in environ}
    os.environ.update(environ)
    sys.modules["seqlab_hub"], old = fake, sys.modules.get("seqlab_hub")
    try:
        namespace = {"get_config": lambda: config, "load_subconfig": lambda path: None, "__file__":
                     str(ROOT / "hub" / "jupyterhub_config.py")}
        exec(compile((ROOT / "hub" / "jupyterhub_config.py").read_text(), "jupyterhub_config.py", "exec"), namespace)
    finally:
        for k, v in saved.items():
            # env-key: puts back the variables saved above, as the caller found them
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        sys.modules.pop("seqlab_hub")
        if old is not None:
            sys.modules["seqlab_hub"] = old
    return config


def test_the_hub_listens_on_loopback_only_and_reports_activity_within_the_cull_timeout(tmp_path):
    for timeout in (60, 90, 3600, 86400):
        c = _hub_config(tmp_path, SEQLAB_HUB_STATE=str(tmp_path), SEQLAB_HUB_TEST_LOGIN="1",
                        SEQLAB_HUB_TEST_PASSWORD="x", SEQLAB_HUB_CULL_TIMEOUT=str(timeout))
        for url in (c.JupyterHub.bind_url, c.JupyterHub.hub_bind_url, c.ConfigurableHTTPProxy.api_url):
            assert urlsplit(url).hostname == "127.0.0.1", url
        assert c.CourseSpawner.ip == "127.0.0.1" and "--ServerApp.ip=127.0.0.1" in c.CourseSpawner.args
        interval = int(c.CourseSpawner.environment["JUPYTERHUB_ACTIVITY_INTERVAL"])
        assert interval == c.JupyterHub.last_activity_interval
        assert interval <= timeout / 4, f"activity every {interval} s against a cull timeout of {timeout} s"
        culler = c.JupyterHub.services[0]["command"]
        assert f"--timeout={timeout}" in culler
        assert c.JupyterHub.authenticator_class == "dummy"
        assert c.CourseSpawner.mem_limit == "2G"


def test_the_hub_refuses_to_start_without_a_login(tmp_path):
    os.environ.pop("SEQLAB_HUB_TEST_LOGIN", None)
    os.environ.pop("SEQLAB_HUB_AUTH_CONFIG", None)
    with pytest.raises(SystemExit, match="no login configured"):
        _hub_config(tmp_path, SEQLAB_HUB_STATE=str(tmp_path))


# -- Kubernetes, on paper ---------------------------------------------------------------------------------------

def _merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) \
            else value
    return merged


def test_the_z2jh_values_pass_the_charts_schema_with_its_defaults():
    import jsonschema

    chart = ROOT / "hub" / "k8s" / "chart"
    values = yaml.safe_load((ROOT / "hub" / "k8s" / "values.yaml").read_text())
    merged = _merge(yaml.safe_load((chart / "values.yaml").read_text()), values)
    schema = json.loads((chart / "values.schema.json").read_text())
    jsonschema.validate(merged, schema)
    broken = _merge(merged, {"singleuser": {"memory": {"limit": {"not": "a size"}}}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_the_z2jh_values_carry_the_measured_limits_culling_prepulling_and_placeholders():
    values = yaml.safe_load((ROOT / "hub" / "k8s" / "values.yaml").read_text())
    single = values["singleuser"]
    assert single["memory"]["limit"] == "2G", "the same limit as the hub make hub-load measured"
    assert single["memory"]["guarantee"] == "1G" and single["cpu"]["limit"] == 1
    assert single["defaultUrl"] == "/lab/tree/work" and single["cmd"] == "jupyterhub-singleuser"
    assert values["cull"]["enabled"] and values["cull"]["timeout"] >= 4 * 300
    assert values["prePuller"]["hook"]["enabled"] and values["prePuller"]["continuous"]["enabled"]
    assert values["scheduling"]["userPlaceholder"]["enabled"] and values["scheduling"]["userPlaceholder"]["replicas"] > 0
    students = _pins(_project()["optional-dependencies"]["hub"])["jupyterhub"]
    dockerfile = (ROOT / "hub" / "k8s" / "hub.Dockerfile").read_text()
    assert re.search(rf"jupyterhub=={re.escape(students)}\b", dockerfile), "the hub image's jupyterhub differs"
    assert values["hub"]["image"]["tag"] == students


def test_hub_link_is_an_nbgitpuller_link_to_the_students_work_copy():
    link = course.hub_link("https://hub.example.edu/", "https://github.com/someone/seqlab", "main", "04")
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "hub.example.edu", "/hub/user-redirect/git-pull")
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert query == {"repo": "https://github.com/someone/seqlab", "branch": "main", "targetpath": "seqlab",
                     "urlpath": "lab/tree/work/04-lstm.ipynb"}
    assert os.environ.get("SEQLAB_COURSE_DIR", "seqlab") == query["targetpath"], "start.py pulls elsewhere"
    with pytest.raises(SystemExit, match="http"):
        course.hub_link("hub.example.edu", "https://github.com/someone/seqlab")
    assert course.main(["hub-link", "--hub", "https://h.example", "--repo", "https://g.example/r"]) == 0


def test_make_hub_smoke_is_ci_s_last_step():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == 'make -C "$hub_checkout" hub-smoke'          # the checkout, or a copy every user can read
    assert re.search(r"^hub-smoke:", (ROOT / "Makefile").read_text(), flags=re.M)
