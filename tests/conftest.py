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


# Markers by the file a test lives in, so that a new test file is classified here, once
# (CONTRIBUTING.md: the fast loop is `pytest -m "not slow and not e2e and not cluster"`).
_NETWORK_FILES = {"test_remote_logdir.py", "test_storage_faults.py"}
_CLUSTER_FILES = {"test_dask_cluster.py", "test_dask_faults.py", "test_dask_held.py"}
# Files whose tests all take seconds each: real servers or processes, the XProf reference,
# fuzzing, generated bombs. Elsewhere a test that takes seconds carries @pytest.mark.slow itself,
# so the fast subset keeps every front end (CLI, MCP, notebook) and stays under 2 minutes.
_SLOW_FILES = (
    {
        "test_answer_cap.py",
        "test_conformance_xprof.py",
        "test_xla_gpu_h200_xprof.py",
        "test_fuzz_service.py",
        "test_fuzz_tensorboard.py",
        "test_hardening.py",
        "test_hostile_inputs.py",
        "test_kineto_fuzz.py",
        "test_memory_budget.py",
        "test_pool.py",
        "test_pool_testdata.py",
        "test_persistent_cache.py",
        "test_protos.py",
        "test_pool_parent_death.py",
        "test_slow_store.py",
        "test_startup_imports.py",
        "test_tensorboard_server.py",
        "test_table_memory.py",
        "test_real_profiles.py",
    }
    | _NETWORK_FILES
    | _CLUSTER_FILES
)


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        path = item.path
        if "e2e" in path.parts:
            item.add_marker(pytest.mark.e2e)
        if path.name in _NETWORK_FILES:
            item.add_marker(pytest.mark.network)
        if path.name in _CLUSTER_FILES:
            item.add_marker(pytest.mark.cluster)
        if path.name in _SLOW_FILES:
            item.add_marker(pytest.mark.slow)
