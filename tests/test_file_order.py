"""The order the two test processes take the suite's files in (tests/file_order.py)."""

from types import SimpleNamespace

from file_order import LongestFileFirst


class _Worker:
    """What the scheduler sees of a test process: the tests it is sent, by index."""

    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices):
        self.sent += indices

    def shutdown(self):
        self.shutting_down = True


def _config():
    """What the scheduler reads of pytest's config: two processes, xdist's default reordering on."""
    option = SimpleNamespace(tx=["2*popen"], loadscopereorder=True, dist="loadfile")
    return SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name))


def test_the_files_are_taken_longest_first_by_their_recorded_seconds():
    collection = [f"tests/{name}.py::test_{i}" for name, count in
                  (("many_quick", 6), ("one_long_walk", 1), ("unknown", 3), ("middling", 2)) for i in range(count)]
    scheduler = LongestFileFirst(_config())
    scheduler._seconds = {"tests/many_quick.py": 3.0, "tests/one_long_walk.py": 90.0, "tests/middling.py": 20.0}
    workers = [_Worker("gw0"), _Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    files = [list(dict.fromkeys(collection[i].split("::")[0][6:-3] for i in worker.sent)) for worker in workers]
    # xdist's default would hand out the file of most tests first. Here the long walk goes first; the
    # file the record does not know counts 2 s a test (6 s: after the middling file, before the quick
    # one); a process with 2 tests or fewer left takes the next file at once.
    assert files == [["one_long_walk", "unknown"], ["middling", "many_quick"]], files
