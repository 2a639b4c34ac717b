import atexit
import os
import shutil
import sys
import tempfile

# Test helpers (xprof_reference, ...) live beside the tests.
sys.path.insert(0, os.path.dirname(__file__))

# The persistent cache of converted profiles stays on in the tests (it is what users get) but
# lives in a fresh directory per test session: never the user's ~/.cache, never carried over
# from an earlier run. Tests of the cache itself point it elsewhere.
_CACHE_DIR = tempfile.mkdtemp(prefix="tb_roofline_test_cache_")
os.environ["TB_ROOFLINE_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, True)
