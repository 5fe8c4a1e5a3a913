"""The set-up stays consistent: one set of pins everywhere, and CI runs the README's command."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml  # a dependency of jupyter_events, so always present where JupyterLab is

import course
from seqlab import notebook_rules

ROOT = Path(__file__).resolve().parent.parent


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # the "hub" extra is the hub image's (binder/environment.yml, checked by tests/test_hub_image.py), not Binder's
    requirements = project["dependencies"] + [r for name, group in project["optional-dependencies"].items()
                                              if name != "hub" for r in group]
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


def test_generated_data_files_are_what_the_code_makes():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_data.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_lab_runs_as_root_and_passes_the_users_options(monkeypatch):
    monkeypatch.setattr(course.os, "geteuid", lambda: 0, raising=False)
    args = course.lab_arguments(["--no-browser", "--port", "8899"])
    assert args[:2] == ["--notebook-dir", str(ROOT / "work")]
    assert args[2:] == ["--allow-root", "--no-browser", "--port", "8899"]
    assert course.lab_arguments(["--allow-root"]).count("--allow-root") == 1
    monkeypatch.setattr(course.os, "geteuid", lambda: 1000, raising=False)
    assert "--allow-root" not in course.lab_arguments([])


def test_lab_settings_overrides_name_real_jupyterlab_settings():
    """make lab turns off JupyterLab's news pop-up; the keys must exist in JupyterLab's own schema."""
    import json
    import sys

    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    for plugin, settings in notebook_rules.LAB_OVERRIDES.items():
        package, _, name = plugin.partition(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        for key, value in settings.items():
            assert key in schema["properties"], f"{plugin} has no setting {key!r}"
            prop = schema["properties"][key]
            allowed = [choice["const"] for choice in prop.get("oneOf", [])] or [value]
            assert value in allowed and isinstance(value, (str if prop["type"] == "string" else bool))


def _nb(label: str, cells: list | None = None) -> str:
    """A minimal notebook as nbformat writes one (what work copies are compared with)."""
    return json.dumps({"cells": cells or [], "metadata": {"label": label}}, indent=1, sort_keys=True) + "\n"


def _course(tmp_path: Path, *names: str) -> Path:
    course_dir = tmp_path / "notebooks"
    course_dir.mkdir()
    for name in names:
        (course_dir / name).write_text(_nb(name))
    return course_dir


def test_lab_copies_the_notebooks_into_work_and_never_overwrites_a_students_copy(tmp_path):
    course_dir, work = _course(tmp_path, "00-start-here.ipynb", "01-why-sequences.ipynb"), tmp_path / "work"
    assert course.sync_work_copies(course_dir, work) == (["00-start-here.ipynb", "01-why-sequences.ipynb"], [])
    assert (work / "01-why-sequences.ipynb").read_text() == _nb("01-why-sequences.ipynb")
    (work / "01-why-sequences.ipynb").write_text("the student's answers")
    # a notebook added to the course later is copied; the student's edited copy stays as it is
    (course_dir / "02-rnn.ipynb").write_text(_nb("new"))
    assert course.sync_work_copies(course_dir, work) == (["02-rnn.ipynb"], [])
    assert (work / "01-why-sequences.ipynb").read_text() == "the student's answers"
    # the course changes a notebook the student has a copy of: said, not overwritten
    (course_dir / "01-why-sequences.ipynb").write_text(_nb("version 2"))
    assert course.sync_work_copies(course_dir, work) == ([], ["01-why-sequences.ipynb"])
    assert (work / "01-why-sequences.ipynb").read_text() == "the student's answers"


def test_reset_takes_the_courses_version_and_keeps_the_students_copy(tmp_path):
    course_dir, work = _course(tmp_path, "04-lstm.ipynb", "05-gru.ipynb"), tmp_path / "work"
    course.sync_work_copies(course_dir, work)
    (work / "04-lstm.ipynb").write_text("the student's answers")
    (course_dir / "04-lstm.ipynb").write_text(_nb("version 2"))
    kept = course.reset_work_copy("04", course_dir, work)
    assert (work / "04-lstm.ipynb").read_text() == _nb("version 2")
    assert kept.parent == work / ".old" and kept.read_text() == "the student's answers"
    assert course.sync_work_copies(course_dir, work) == ([], [])          # up to date again
    assert course.reset_work_copy("05-gru.ipynb", course_dir, work).read_text() == _nb("05-gru.ipynb")
    with pytest.raises(SystemExit, match="no course notebook named .99.; .*04-lstm, 05-gru"):
        course.reset_work_copy("99", course_dir, work)


def test_work_copies_lose_the_outputs_of_reveal_cells_and_keep_every_other_output(tmp_path):
    """A prediction's measurement (a cell tagged reveal) is shown only when the student runs it."""
    def code(tags, text):
        return {"cell_type": "code", "execution_count": 3, "id": text, "metadata": {"tags": tags}, "source": "x",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": text}]}

    answer = code(["nbval-check-output", notebook_rules.REVEAL_TAG], "the answer")
    cells = [code([], "before"), answer, code([], "after")]
    course_dir = _course(tmp_path, "02-rnn.ipynb")
    (course_dir / "02-rnn.ipynb").write_text(_nb("02", cells))
    work = tmp_path / "work"
    for copy in (lambda: course.sync_work_copies(course_dir, work), lambda: course.reset_work_copy("02", course_dir, work)):
        copy()
        got = json.loads((work / "02-rnn.ipynb").read_text())["cells"]
        assert [c["outputs"] for c in got] == [cells[0]["outputs"], [], cells[2]["outputs"]]
        assert [c["execution_count"] for c in got] == [3, None, 3]
    assert course.sync_work_copies(course_dir, work) == ([], [])        # a stripped copy is still up to date


def test_every_committed_work_copy_keeps_all_but_the_reveal_outputs(tmp_path):
    work = tmp_path / "work"
    course.sync_work_copies(course.COURSE_NOTEBOOKS, work)
    for notebook in sorted(course.COURSE_NOTEBOOKS.glob("*.ipynb")):
        original = json.loads(notebook.read_text())["cells"]
        copied = json.loads((work / notebook.name).read_text())["cells"]
        assert len(copied) == len(original)
        for before, after in zip(original, copied):
            if notebook_rules.is_reveal(before):
                assert after["outputs"] == [], notebook.name
            elif after["source"] != before["source"]:       # a prediction's result, folded
                folded = notebook_rules.RESULT_FOLD.format(text="".join(before["source"]).strip())
                assert after == before | {"source": folded}
            else:
                assert after == before, notebook.name


def test_the_prose_that_gives_a_predictions_result_is_folded_in_work_copies_and_the_release(tmp_path):
    """Reading on past a prediction must not give its answer: the markdown right after the measurement is
    folded, in every notebook where a measurement follows the check (9 of the 21 predictions)."""
    folded = {}
    for notebook in sorted(course.COURSE_NOTEBOOKS.glob("*.ipynb")):
        nb = notebook_rules.without_reveals(json.loads(notebook.read_text()))
        texts = ["".join(c["source"]) for c in nb["cells"]]
        folded[notebook.name[:2]] = sum(t.startswith("<details>\n<summary>What the measurement shows") for t in texts)
    assert sum(folded.values()) == 9 and folded["04"] == 1 and folded["16"] == 1, folded
    lstm = notebook_rules.without_reveals(json.loads((course.COURSE_NOTEBOOKS / "04-lstm.ipynb").read_text()))
    result = next("".join(c["source"]) for c in lstm["cells"] if "What the measurement shows" in "".join(c["source"]))
    assert "learns the task at $T = 10$" in result and result.rstrip().endswith("</details>")


def test_work_copies_are_ignored_by_git_and_find_the_courses_data_from_anywhere(tmp_path):
    import subprocess
    import sys

    ignored = subprocess.run(["git", "check-ignore", "-q", "work/04-lstm.ipynb"], cwd=ROOT)
    assert ignored.returncode == 0, "work/ must be git-ignored"
    # a notebook in work/ runs with work/ as its directory: seqlab finds the data from its package
    found = subprocess.run([sys.executable, "-c", "from seqlab.pretrained import checkpoint_dir; "
                            "from seqlab.data import load_corpus; "
                            "print(checkpoint_dir()); print(len(load_corpus('python-stdlib')))"],
                           cwd=tmp_path, capture_output=True, text=True, check=True,
                           # env-key: this process's environment, less the one variable under test
                           env={k: v for k, v in __import__("os").environ.items() if k != "SEQLAB_CHECKPOINTS"})
    checkpoints, characters = found.stdout.split()
    assert Path(checkpoints) == ROOT / "data" / "checkpoints" and any(Path(checkpoints).iterdir())
    assert int(characters) > 0


def test_setup_removes_the_slideshow_that_cannot_draw_widgets():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "jupyterlab-slideshow==0.3.4" in project["dependencies"]
    assert not any(r.startswith("jupyterlab-rise") for r in project["dependencies"])
    assert course.RETIRED_PACKAGES == ["jupyterlab-rise"]


def test_make_test_runs_on_one_worker_per_core_unless_the_user_chose():
    assert course.parallel_arguments([], cpus=2) == ["-n", "2", "--dist", "loadscope", "--no-loadscope-reorder"]
    assert course.parallel_arguments([], cpus=16)[:2] == ["-n", "4"]
    assert course.parallel_arguments([], cpus=1) == []
    assert course.parallel_arguments(["-p", "no:cacheprovider", "tests/test_hmm.py"], cpus=2)[:2] == ["-n", "2"]
    for chosen in (["-n", "0"], ["-n0"], ["--numprocesses=3"], ["-p", "no:xdist"], ["--dist=load"]):
        assert course.parallel_arguments(chosen, cpus=2) == [], chosen


def test_each_notebook_and_module_is_one_xdist_unit_and_each_browser_fixture_its_own():
    """`make test` runs pytest-xdist's `--dist loadscope`, which hands a worker the test functions of one module,
    or the tests of one class, as one unit: what a test's id names before its last '::'. So a notebook's cells
    stay in one kernel, in order, and each widget fixture's browser test, the longest, is a unit of its own.
    A widget notebook (04) keeps its nbval items beside the browser tests, as a notebook without widgets (02)
    does: every notebook runs under nbval (tests/test_root_conftest.py)."""
    collected = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                                "notebooks/02-rnn.ipynb", "notebooks/04-lstm.ipynb", "tests/test_hmm.py",
                                "tests/browser/test_widgets_in_lab.py"],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    units: dict[str, list[str]] = {}
    for test in (line for line in collected.stdout.splitlines() if "::" in line):
        units.setdefault(test.rsplit("::", 1)[0], []).append(test)
    assert len(units["notebooks/02-rnn.ipynb"]) > 10 and len(units["notebooks/04-lstm.ipynb"]) > 10
    assert len(units["tests/test_hmm.py"]) > 1
    browser = [unit for unit in units if "::TestFixture_" in unit]
    assert len(browser) >= 2 and all(len(units[unit]) == 1 for unit in browser), units
    assert "tests/browser/test_widgets_in_lab.py::TestFixture_gate_explorer" in browser
    assert set(units) == {"notebooks/02-rnn.ipynb", "notebooks/04-lstm.ipynb", "tests/test_hmm.py",
                          "tests/browser/test_widgets_in_lab.py", *browser}
    assert "deselected" not in collected.stdout, collected.stdout[-500:]


def _capability_under(profile: str) -> str:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                           capture_output=True, text=True, check=True, env=course.profile_environment(profile))
    return probe.stdout.strip()


def test_arithmetic_profiles_set_their_variables_and_nothing_left_in_the_shell():
    """`course.py test --profiles` runs the notebooks as other machines compute: each profile's environment
    holds its own settings of the arithmetic variables and drops any the shell had set."""
    shell = {"PATH": "/bin", "MKL_CBWR": "AUTO", "OMP_NUM_THREADS": "7"}
    assert course.profile_environment("native", shell) == {"PATH": "/bin"}
    assert course.profile_environment("baseline", shell)["ATEN_CPU_CAPABILITY"] == "default"
    assert course.profile_environment("threads1", shell)["OMP_NUM_THREADS"] == "1"
    assert "MKL_CBWR" not in course.profile_environment("threads1", shell)
    assert {"native", "baseline", "threads1"} <= set(course.PROFILES) and course.CI_EXTRA_PROFILE in course.PROFILES
    with pytest.raises(SystemExit, match="no arithmetic profile 'avx9'"):
        course.profile_environment("avx9")
    # and the settings reach torch in a child process (as in a kernel) on an x86-64 CPU
    cpuinfo = Path("/proc/cpuinfo")
    if platform.machine() == "x86_64" and cpuinfo.exists():
        assert _capability_under("baseline") == "DEFAULT"
        if " avx2" in cpuinfo.read_text():
            assert _capability_under("avx2") == "AVX2"


def test_profiles_option_and_the_notebook_by_profile_table(tmp_path):
    assert course.split_profiles(["-x", "notebooks/"]) == (None, ["-x", "notebooks/"])
    assert course.split_profiles(["--profiles"])[0] == list(course.PROFILES)
    assert course.split_profiles(["--profiles=baseline,threads1", "-x"]) == (["baseline", "threads1"], ["-x"])
    with pytest.raises(SystemExit, match="no arithmetic profile"):
        course.split_profiles(["--profiles=native,sse9"])
    report = tmp_path / "r.xml"
    report.write_text('''<testsuites><testsuite>
      <testcase classname="notebooks.03-bptt.ipynb" name="Cell 0" file="notebooks/03-bptt.ipynb"/>
      <testcase classname="notebooks.03-bptt.ipynb" name="Cell 1" file="notebooks/03-bptt.ipynb"><failure/></testcase>
      <testcase classname="notebooks.04-lstm.ipynb" name="Cell 0" file="notebooks/04-lstm.ipynb"/>
    </testsuite></testsuites>''')
    outcomes = course.junit_outcomes(report)
    assert outcomes == {"03-bptt.ipynb": (1, 1), "04-lstm.ipynb": (1, 0)}
    table = course.profile_table({"native": outcomes, "baseline": {"04-lstm.ipynb": (1, 0)}}).splitlines()
    assert table[0].split() == ["notebook", "native", "baseline"]
    assert table[1].split() == ["03-bptt.ipynb", "1", "failed", "not", "run"]
    assert table[2].split() == ["04-lstm.ipynb", "ok", "ok"]


def test_worker_threads_share_the_cores_and_wait_passively_only_when_oversubscribed():
    """`make test` runs one worker per core: each gets cores // workers torch threads (spinning threads of
    two 2-thread workers on 2 cores made trainings 4x slower), a profile's own count wins, and only an
    oversubscribed run waits passively (alone, passive waiting made notebook 3 4x slower)."""
    assert course.worker_threads({"PATH": "/bin"}, 2, cpus=2) == {"PATH": "/bin", "OMP_NUM_THREADS": "1",
                                                                 "MKL_NUM_THREADS": "1"}
    assert course.worker_threads({}, 4, cpus=16)["OMP_NUM_THREADS"] == "4"
    assert "OMP_WAIT_POLICY" not in course.worker_threads({}, 2, cpus=2)
    three = course.worker_threads(course.profile_environment("threads3", {}), 2, cpus=2)
    assert three["OMP_NUM_THREADS"] == "3" and three["OMP_WAIT_POLICY"] == "PASSIVE"
    assert course.worker_threads({"PATH": "/bin"}, 1, cpus=2) == {"PATH": "/bin"}      # alone: torch's own default
    assert course.worker_threads({"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "2"}, 2, cpus=2)["OMP_WAIT_POLICY"] == "ACTIVE"


def test_bench_runs_every_benchmark_or_one_named_with_its_own_flags(tmp_path):
    for name in ("bench_lm.py", "bench_rnn.py"):
        (tmp_path / name).write_text("")
    assert course.bench_plan([], tmp_path) == [[str(tmp_path / "bench_lm.py")], [str(tmp_path / "bench_rnn.py")]]
    assert course.bench_plan(["rnn", "--hidden", "256"], tmp_path) == [[str(tmp_path / "bench_rnn.py"), "--hidden", "256"]]
    with pytest.raises(SystemExit, match="name the benchmark first, one of lm, rnn; got '--hidden'"):
        course.bench_plan(["--hidden", "256"], tmp_path)


def test_make_notebook_executes_tags_and_tests_the_one_notebook_it_is_given():
    notebook = course.find_notebook("11")
    assert notebook.name == "11-positional-encodings.ipynb" and course.find_notebook("11-positional-encodings") == notebook
    plan = course.notebook_plan(notebook)
    commands = [command for _, command in plan]
    path = "notebooks/11-positional-encodings.ipynb"
    assert commands[:3] == [["scripts/execute_notebooks.py", path], ["scripts/portability.py", "run", path],
                            ["scripts/portability.py", "tag", path]]
    assert commands[3] == ["course.py", "test", f"--profiles=native,{course.CI_EXTRA_PROFILE}", path,
                           "tests/test_notebooks_committed.py", "tests/test_exercises_nb11.py"]
    assert "notebook:" in (course.ROOT / "Makefile").read_text() and course.VERBS["notebook"] is course.cmd_notebook


@pytest.mark.parametrize("spelling", ["04", "4", "04-lstm"])
def test_every_make_target_that_takes_NB_takes_each_spelling_of_a_notebooks_name(spelling, tmp_path):
    """make reset, make notebook and make execute name a notebook through one resolver, the manifest's."""
    import execute_notebooks

    verbs = re.findall(r"course\.py (\S+) [^\n]*\$\(NB\)", (course.ROOT / "Makefile").read_text())
    assert sorted(verbs) == ["execute", "notebook", "reset"], "a new target taking NB=: test its names here"
    lstm = course.COURSE_NOTEBOOKS / "04-lstm.ipynb"
    course.reset_work_copy(spelling, course.COURSE_NOTEBOOKS, tmp_path / "work")
    assert [p.name for p in (tmp_path / "work").glob("*.ipynb")] == [lstm.name]
    assert course.find_notebook(spelling) == lstm                          # make notebook: course.cmd_notebook
    assert execute_notebooks.notebook_paths([spelling]) == [lstm]
    with pytest.raises(SystemExit, match="no course notebook named '04-gru'"):
        execute_notebooks.notebook_paths(["04-gru"])
