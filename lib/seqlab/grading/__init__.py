"""Grading a class's notebooks with the course's own checkers, safely: ``python3 course.py grade``.

- :mod:`~seqlab.grading.submissions` reads what students hand in (notebooks, LMS zips) without trusting it;
- :mod:`~seqlab.grading.sandbox` runs each answer in a child process that has no network, cannot see the
  key or other students' work, cannot write to the course, and is killed at its limits;
- :mod:`~seqlab.grading.child` is that child: it only reports what the student's function returned;
- :mod:`~seqlab.grading.codec` carries those values back as plain data;
- :mod:`~seqlab.grading.grader` judges them in the trusted parent with the rule ``check()`` uses;
- :mod:`~seqlab.grading.reports` writes the gradebook, the feedback and the class report;
- :mod:`~seqlab.grading.cli` is the command line (``grade`` and the students' ``selfcheck``).
"""
