"""Runs every tests/python/test_*.py with unittest; prints "ok <test> (time)"
per passing test, the failures in full, and "N passed, N failed" last."""

import os
import sys
import time
import unittest


class Result(unittest.TextTestResult):
    def startTest(self, test: unittest.TestCase) -> None:
        self._t0 = time.monotonic()
        super().startTest(test)

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self.stream.write(f"ok {test.id()} ({time.monotonic() - self._t0:.1f} s)\n")


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    suite = unittest.defaultTestLoader.discover(here, pattern=pattern, top_level_dir=here)
    t0 = time.monotonic()
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=0, resultclass=Result)
    r = runner.run(suite)
    failed = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
    skipped = len(r.skipped)
    passed = r.testsRun - failed - skipped
    for test, why in r.skipped:
        print(f"skipped {test.id()}: {why}")
    print(f"python {sys.version.split()[0]}, {time.monotonic() - t0:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
