"""Where the tests and the repository are, for test files at any depth of tests/."""

import os

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
TESTDATA = os.path.join(REPO, "testdata")
