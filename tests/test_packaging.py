"""The set-up stays consistent: one set of pins everywhere, and CI runs the README's command."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml  # a dependency of jupyter_events, so always present where JupyterLab is

import course

ROOT = Path(__file__).resolve().parent.parent


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for group in project["optional-dependencies"].values() for r in group]
    pins = {}
    for requirement in requirements:
        name, sep, version = requirement.partition("==")
        assert sep, f"pyproject.toml: {requirement!r} is not pinned with =="
        pins[name.lower()] = version
    return pins


def _environment_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = {}
    for line in pip_section:
        if line.startswith("-"):
            continue  # pip options such as --extra-index-url
        name, sep, version = line.partition("==")
        assert sep, f"environment.yml: {line!r} is not pinned with =="
        pins[name.lower()] = version
    return pins


def test_environment_yml_has_the_same_pins_as_pyproject():
    assert _environment_pins() == _pyproject_pins()


def test_torch_is_pinned_to_the_tested_cpu_build():
    assert _pyproject_pins()["torch"] == "2.13.0"


def test_no_deps_packages_are_installed_by_every_set_up_path():
    post_build = (ROOT / "postBuild").read_text()
    for package in course.NO_DEPS_PACKAGES:
        assert f"--no-deps {package}" in post_build


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^\s*(make \w+)\s*(?:#.*)?$", readme, flags=re.M)
    assert commands[:2] == ["make lab", "make test"], "README must open with the two commands"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert "make test" in ci


def test_readme_lists_every_notebook_with_a_run_time():
    readme = (ROOT / "README.md").read_text()
    listed = re.findall(r"^\| `(\d\d-[a-z0-9-]+)` \|.*\| (\d+) s \|$", readme, flags=re.M)
    notebooks = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
    assert [name for name, _ in listed] == notebooks, "README's notebook table must name every notebook, in order"


def test_generated_data_files_are_what_the_code_makes():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_data.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_lab_runs_as_root_and_passes_the_users_options(monkeypatch):
    monkeypatch.setattr(course.os, "geteuid", lambda: 0, raising=False)
    args = course.lab_arguments(["--no-browser", "--port", "8899"])
    assert args[:2] == ["--notebook-dir", str(ROOT / "notebooks")]
    assert args[2:] == ["--allow-root", "--no-browser", "--port", "8899"]
    assert course.lab_arguments(["--allow-root"]).count("--allow-root") == 1
    monkeypatch.setattr(course.os, "geteuid", lambda: 1000, raising=False)
    assert "--allow-root" not in course.lab_arguments([])


def test_lab_settings_overrides_name_real_jupyterlab_settings():
    """make lab turns off JupyterLab's news pop-up; the keys must exist in JupyterLab's own schema."""
    import json
    import sys

    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    for plugin, settings in course.LAB_OVERRIDES.items():
        package, _, name = plugin.partition(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        for key, value in settings.items():
            assert key in schema["properties"], f"{plugin} has no setting {key!r}"
            prop = schema["properties"][key]
            allowed = [choice["const"] for choice in prop.get("oneOf", [])] or [value]
            assert value in allowed and isinstance(value, (str if prop["type"] == "string" else bool))
