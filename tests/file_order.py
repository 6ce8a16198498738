"""The order in which the two test processes take the suite's files: the longest first.

pytest-xdist's `--dist loadfile` hands out whole files, by default those with the most tests
first. The browser walks are files of one or two tests that take a minute or more each, so they
came last, and a process that had asked for more work held up to three of them while the other
process had nothing left: the run ended a minute and a half after one of its processes did.
Taken longest first (by the seconds each file took in a recorded run, FILE_SECONDS), the long
files overlap and the last ones are short. A file the record does not know counts 2 s a test.

`pytest --record-file-seconds` updates the record with the files of the run it ends (passed or
not); it only orders the files, so a stale record costs time, never a result.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
UNKNOWN_TEST_S = 2.0


def recorded_seconds() -> dict[str, float]:
    try:
        return json.loads(FILE_SECONDS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


class LongestFileFirst(LoadFileScheduling):
    """`--dist loadfile`, its files handed out longest first."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self._seconds = recorded_seconds()
        self._ordered = False

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the first call comes once the work queue is filled (schedule())
            files = sorted(self.workqueue.items(),
                           key=lambda item: -self._seconds.get(item[0], UNKNOWN_TEST_S * len(item[1])))
            self.workqueue.clear()
            self.workqueue.update(files)
            self._ordered = True
        super()._assign_work_unit(node)


class FileSeconds:
    """A plugin of `--record-file-seconds`: each file's setup, call and teardown seconds, summed as the
    reports arrive (in the main process, from both test processes), written when the run ends."""

    def __init__(self):
        self.seconds: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid.split("::", 1)[0]] += report.duration

    def pytest_sessionfinish(self) -> None:
        """The record with this run's files updated (a run of a few files keeps the others' seconds),
        less the files that are gone."""
        root = FILE_SECONDS.parent.parent
        seconds = {name: s for name, s in recorded_seconds().items() if (root / name).is_file()}
        seconds.update(self.seconds)
        ordered = {name: round(s, 1) for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])}
        FILE_SECONDS.write_text(json.dumps(ordered, indent=0) + "\n", encoding="utf-8")
