"""The grader against hostile submissions: each is graded, the student's other exercise and the next student
are still graded, and the machine is unchanged (no process left, no file deleted, nothing read or sent).

Each case replaces the answer to notebook 01's ``perplexity`` with hostile code, beside a correct
``bigram_counts``. The table of what happened, and how long it took, is written to
``test-artifacts/grading/adversarial.md`` (the closing note of a grading change quotes it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from grading_helpers import ROOT, as_bytes, with_answers
from seqlab.exercises import EXERCISES
from seqlab.grading import grader, sandbox
from seqlab.grading.submissions import Submission, parse_notebook

STEM = "01-why-sequences"
CORRECT = "def perplexity(probs):\n    return math.exp(-sum(math.log(p) for p in probs) / len(probs))\n"
BIGRAMS = ("def bigram_counts(text):\n    counts = {}\n    for i in range(len(text) - 1):\n"
           "        counts[text[i:i + 2]] = counts.get(text[i:i + 2], 0) + 1\n    return counts\n")
SECRET = "hidden-secret-7f3a"
LIMITS = sandbox.Limits(seconds=20.0)
MODE = sandbox.isolation_mode()
FULL = MODE == "namespaces+uid"
CANARY_IN_CHECKOUT = ROOT / "test-artifacts" / "grading" / "canary" / "keep.txt"
CANARY_IN_HOME = Path.home() / ".seqlab-grading-canary"
TABLE: list[tuple[str, str, str, float]] = []
PATHS: dict[str, str] = {}           # the instructor folder, once the key fixture has made it


def _public_table() -> dict[str, float]:
    ex = EXERCISES["perplexity"]
    return {repr(list(case.args[0])): ex.reference(*case.args) for case in ex.cases}


def _hostile(server_port: int) -> dict[str, tuple[str, set[str]]]:
    """label -> (the answer cell's code, the statuses it may get)."""
    return {
        "an infinite Python loop": ("def perplexity(probs):\n    while True:\n        pass\n", {"timed out"}),
        "an endless C-level computation that ignores SIGTERM and SIGALRM": (
            "import re, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
            "def perplexity(probs):\n    return re.match(r'(a+)+$', 'a' * 64 + 'b')\n", {"timed out"}),
        "an infinite loop at the cell's top level": ("while True:\n    pass\n" + CORRECT, {"timed out"}),
        "allocating 20 GiB": ("def perplexity(probs):\n    block = bytearray(20 * 2**30)\n    return 1.0\n",
                              {"failed"}),
        "a daemon left behind": (
            "import subprocess\n" + CORRECT.replace("    return", "    subprocess.Popen(['sleep', '313.25'], "
                                                    "start_new_session=True)\n    return"), {"passed"}),
        "deleting $HOME and the checkout": (
            f"import shutil, os\nfor path in [{str(CANARY_IN_CHECKOUT.parent)!r}, {str(CANARY_IN_HOME)!r}]:\n"
            "    shutil.rmtree(path, ignore_errors=True)\n    try:\n        os.remove(path)\n"
            "    except OSError:\n        pass\n" + CORRECT, {"passed"}),
        "reading the hidden cases": (
            "import glob\ndef perplexity(probs):\n    found = [open(p).read() for p in glob.glob('/tmp/**/hidden_cases.py', "
            f"recursive=True)]\n    return found[0] if found else open({PATHS.get('instructor', '/nonexistent')!r}"
            " + '/hidden_cases.py').read()\n",
            {"failed"}),
        "opening a socket, loopback and outside": (
            "import socket\ndef perplexity(probs):\n"
            f"    socket.create_connection(('127.0.0.1', {server_port}), timeout=2)\n"
            "    socket.create_connection(('8.8.8.8', 53), timeout=2)\n    return 1.0\n", {"failed"}),
        "a gigabyte of prints": ("import os\nfor _ in range(2**20):\n    print('x' * 1023)\n"
                                 "os.write(1, b'y' * 2**24)\n" + CORRECT, {"passed"}),
        "flooding the result channel": (
            "import os\ndef perplexity(probs):\n    for fd in range(3, 64):\n        try:\n"
            "            os.write(fd, b'x' * 2**20)\n        except OSError:\n            continue\n"
            "        for _ in range(100):\n            os.write(fd, b'x' * 2**20)\n    return 1.0\n",
            {"failed", "crashed", "partial"}),
        "patching check, torch.allclose and showtraceback": (
            "import torch, sys\ntorch.allclose = lambda *a, **k: True\ncheck = lambda *a, **k: True\n"
            "sys.excepthook = lambda *a: None\ndef perplexity(probs):\n    return 0.0\n", {"failed"}),
        "an always-equal object": (
            "class Same:\n    def __eq__(self, other):\n        return True\n    __float__ = lambda self: 0.0\n"
            "def perplexity(probs):\n    return Same()\n", {"failed"}),
        "a Tensor subclass that says it is equal": (
            "import torch\nclass Liar(torch.Tensor):\n    def __eq__(self, other):\n        return True\n"
            "def perplexity(probs):\n    return torch.tensor(0.0).as_subclass(Liar)\n", {"failed"}),
        "forging the grader's result channel": (
            "import os, json\ndef perplexity(probs):\n    line = json.dumps({'event': 'case', 'i': 0, 'status': 'passed'})\n"
            "    for fd in range(3, 64):\n        try:\n            os.write(fd, (line + '\\n' + json.dumps("
            "{'event': 'done'}) + '\\n').encode())\n        except OSError:\n            pass\n    os._exit(0)\n",
            {"crashed", "failed"}),
        "calling the checker's own reference": (
            "from seqlab.exercises import EXERCISES\ndef perplexity(probs):\n"
            "    return EXERCISES['perplexity'].reference(probs)\n", {"passed"}),
        "hard-coded public outputs": (
            f"TABLE = {_public_table()!r}\ndef perplexity(probs):\n    return TABLE.get(repr(list(probs)), 1.0)\n",
            {"partial"}),
        "mutating the inputs and reseeding the generators": (
            "import random, torch\ndef perplexity(probs):\n    value = math.exp(-sum(math.log(p) for p in probs) / len(probs))\n"
            "    probs.clear()\n    torch.manual_seed(1234)\n    random.seed(1)\n    return value\n", {"passed"}),
        "a segfault": ("import ctypes\ndef perplexity(probs):\n    return ctypes.string_at(0)\n", {"crashed"}),
    }


@pytest.fixture(scope="module")
def loopback_server():
    """A TCP server on loopback that counts connections: the sandbox must never reach it."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve():
        server.settimeout(0.5)
        while not getattr(server, "closed", False):
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except OSError:
                if server.fileno() == -1:
                    return
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    instructor = tmp_path_factory.mktemp("instructor")
    instructor.chmod(0o700)
    PATHS["instructor"] = str(instructor)
    (instructor / "hidden_cases.py").write_text(
        f"# {SECRET}\nfrom seqlab.exercises import Case\n"
        "HIDDEN = {'perplexity': [Case(([0.2, 0.4, 0.1],), 'three tokens'), Case(([0.9] * 7,), 'seven alike')]}\n")
    return grader.build_key(STEM, {"perplexity": 1.0, "bigram_counts": 1.0}, instructor=instructor)


@pytest.fixture(scope="module", autouse=True)
def canaries_and_table():
    CANARY_IN_CHECKOUT.parent.mkdir(parents=True, exist_ok=True)
    CANARY_IN_CHECKOUT.write_text("must survive grading\n")
    CANARY_IN_HOME.write_text("must survive grading\n")
    yield
    CANARY_IN_HOME.unlink(missing_ok=True)
    lines = [f"Isolation mode: {MODE}. Limits: {LIMITS.seconds:g} s per exercise, {LIMITS.memory / 2**30:g} GiB.", "",
             "| submission | perplexity | the other exercise | seconds |", "|---|---|---|---|"]
    lines += [f"| {label} | {status} | {other} | {seconds:.1f} |" for label, status, other, seconds in TABLE]
    out = ROOT / "test-artifacts" / "grading"
    out.mkdir(parents=True, exist_ok=True)
    (out / "adversarial.md").write_text("\n".join(lines) + "\n")


def grade(key, answer: str, student: str = "hostile") -> dict:
    nb = with_answers(STEM, {"perplexity": answer + '\ncheck("perplexity", perplexity)\n',
                             "bigram_counts": BIGRAMS + '\ncheck("bigram_counts", bigram_counts)\n'})
    raw = as_bytes(nb)
    return grader.grade_submission(key, Submission(student, f"{student}.ipynb", "0", parse_notebook(raw)),
                                   limits=LIMITS, mode=MODE)


def _sleepers() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"313.25" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("label", list(_hostile(0)))
def test_a_hostile_answer_is_graded_and_harms_nothing(label, key, loopback_server):
    port, accepted = loopback_server
    answer, allowed = _hostile(port)[label]
    start = time.monotonic()
    record = grade(key, answer)
    seconds = time.monotonic() - start
    hostile, other = record["exercises"]["perplexity"], record["exercises"]["bigram_counts"]
    TABLE.append((label, f"{hostile['status']} ({hostile['score']:g}/1)", other["status"], seconds))
    assert hostile["status"] in allowed, (hostile["status"], hostile["message"], hostile["cases"])
    assert other["status"] == "passed", other
    assert SECRET not in json.dumps(record)
    assert not accepted, "the sandbox reached a loopback server"
    assert CANARY_IN_CHECKOUT.exists() and CANARY_IN_HOME.exists(), "a file outside the sandbox was deleted"
    assert not _sleepers(), "a process outlived its sandbox"
    if FULL:
        assert not sandbox.leftover_processes()
    if hostile["status"] == "timed out":
        assert seconds < 3 * LIMITS.seconds + 30


def test_flags_name_what_needs_a_human_look(key):
    twin = grade(key, _hostile(0)["calling the checker's own reference"][0])
    assert "perplexity: uses seqlab.exercises, EXERCISES" in twin["flags"]
    hard_coded = grade(key, _hostile(0)["hard-coded public outputs"][0])
    assert "perplexity: passes the public checks but fails hidden ones" in hard_coded["flags"]
    hidden = [c for c in hard_coded["exercises"]["perplexity"]["cases"] if c["hidden"]]
    assert hidden and all("got" not in c and "expected" not in c and c["what"] is None for c in hidden)


@pytest.mark.skipif(not FULL, reason=f"a fork bomb is contained by a user id of its own (mode namespaces+uid, "
                                     f"grader run as root); this machine gives {MODE}")
def test_a_fork_bomb_is_contained(key):
    bomb = ("import os\ndef perplexity(probs):\n    while True:\n        try:\n            os.fork()\n"
            "        except OSError:\n            pass\n")
    start = time.monotonic()
    record = grade(key, bomb)
    TABLE.append(("a fork bomb", record["exercises"]["perplexity"]["status"],
                  record["exercises"]["bigram_counts"]["status"], time.monotonic() - start))
    assert record["exercises"]["perplexity"]["status"] == "timed out"
    assert record["exercises"]["bigram_counts"]["status"] == "passed"
    assert not sandbox.leftover_processes()


def test_the_next_student_is_graded_normally(key):
    record = grade(key, CORRECT, student="next")
    assert record["exercises"]["perplexity"]["status"] == "passed"
    assert record["score"] == 2.0
    assert CANARY_IN_CHECKOUT.read_text() == "must survive grading\n"


def test_the_sandbox_sees_no_network_no_instructor_folder_and_a_private_tmp(key, tmp_path):
    probe = ("import os, socket\ndef perplexity(probs):\n    seen = []\n    try:\n"
             "        socket.create_connection(('127.0.0.1', 9), timeout=1)\n        seen.append('network')\n"
             "    except OSError:\n        pass\n"
             f"    if {sandbox.mount_plan([], MODE).count('tmp:/tmp') == 1} and os.path.exists({str(tmp_path)!r}):\n"
             "        seen.append('tmp')\n"
             "    if seen:\n        raise RuntimeError(seen)\n    return 1.5\n")
    (tmp_path / "marker").write_text("x")
    record = grade(key, probe)
    cases = record["exercises"]["perplexity"]["cases"]
    # 1.5 is wrong for every case, so "failed" (not "raised") everywhere means: no network, /tmp its own
    # (unless this checkout itself lives in /tmp, which the sandbox then cannot cover)
    assert all(c["status"] == "failed" for c in cases), cases
    assert os.path.exists(tmp_path / "marker")
    assert shutil.which("unshare") is None or MODE != "rlimits-only"


def test_children_running_at_once_get_user_ids_of_their_own():
    """Two graders (or two test workers) at once must never share a sandbox user id: the cleanup after one
    child kills every process of its id."""
    with sandbox.lease_uid(0) as first, sandbox.lease_uid(0) as second:
        assert first != second and {first, second} <= set(range(sandbox.SANDBOX_UID, sandbox.SANDBOX_UID + sandbox.SLOTS))
    with sandbox.lease_uid(0) as again:
        assert again == first, "a released id is free again"


def test_a_scratch_folder_that_holds_the_course_has_its_other_folders_hidden(tmp_path, monkeypatch):
    """A checkout under /tmp: /tmp cannot be replaced, so every other folder in it is hidden (an earlier run's
    instructor folder among them), down through the checkout's ancestors; the checkout itself stays."""
    checkout = tmp_path / "runs" / "clone"
    for folder in (checkout / "lib", checkout / ".venv", tmp_path / "runs" / "old-instructor",
                   tmp_path / "pytest-of-root" / "instructor0", tmp_path / "other"):
        folder.mkdir(parents=True)
    (tmp_path / "loose-file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "other")
    monkeypatch.setattr(sandbox, "_needed_paths", lambda: [checkout / "lib", checkout / ".venv"])
    monkeypatch.setattr(sandbox, "read_only_paths", lambda: [checkout, Path.home()])
    assert sandbox._around_the_course(tmp_path) == [tmp_path / "other", tmp_path / "pytest-of-root",
                                                    tmp_path / "runs" / "old-instructor"]
