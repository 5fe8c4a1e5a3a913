"""Grading a class's notebooks with the course's own checkers, safely: ``python3 course.py grade``.

- :mod:`~seqlab.grading.submissions` reads what students hand in (notebooks, LMS zips) without trusting it;
- :mod:`~seqlab.grading.sandbox` builds the sandbox (bubblewrap: an allowlist root, no network) and its
  workers, checks that it can run before anyone is graded, and leases slots, user ids and cgroups;
- :mod:`~seqlab.grading.worker` is a worker inside it: it forks a fresh, unprivileged process per exercise;
- :mod:`~seqlab.grading.child` is what that process runs: it only reports what the student's function returned;
- :mod:`~seqlab.grading.codec` carries those values back as plain data;
- :mod:`~seqlab.grading.grader` judges them in the trusted parent with the rule ``check()`` uses;
- :mod:`~seqlab.grading.reports` writes the gradebook, the feedback and the class report;
- :mod:`~seqlab.grading.cli` is the command line (``grade`` and the students' ``selfcheck``).
"""
