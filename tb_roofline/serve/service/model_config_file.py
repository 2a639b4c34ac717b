"""The model config of a serving trace (readers/model_config.py), found as the engine metrics
file is (serve/service/report.py `engine_for`): the service's `--model-config`, else
TB_ROOFLINE_MODEL_CONFIG, else the nearest `model_config.json` from the profile's folder up to
the logdir.
Only Kineto traces have serving steps to clamp. The file's identity (path, size, version) joins
the profile's in every cache key, so a new or edited config shows at once.
"""

from __future__ import annotations

import os

from tb_roofline import errors, settings, storage

# readers/model_config.py FILE_NAME: the readers package loads numpy, which listing runs must not
FILE_NAME = "model_config.json"


def config_path(explicit: str | None, run, profile_path: str, logdir: str | None) -> str | None:
    """The config file that applies to one profile of `run`, or None."""
    if run.format != "kineto":
        return None
    path = explicit or settings.text(settings.MODEL_CONFIG) or None
    if path is None and not storage.is_remote(profile_path):
        from tb_roofline.serve.service import workload_file  # late: it loads the model

        path = workload_file.nearest_file(profile_path, logdir, FILE_NAME)
    return path


def signature(path: str | None) -> tuple:
    """The config's part of a cache key: () without one."""
    if path is None:
        return ()
    try:
        st = os.stat(path)
    except OSError:
        return (path, None)  # load() names the problem
    return (path, st.st_size, st.st_mtime_ns)


def windows(path: str | None):
    """The attention windows of the config at `path` (None without one); a bad file is the
    user's error, naming it."""
    if path is None:
        return None
    from tb_roofline.readers import model_config  # late: listing runs needs no reader

    try:
        return model_config.load(path)
    except model_config.ModelConfigError as exc:
        raise errors.BadModelConfigFileError(f"model config: {exc}") from None
