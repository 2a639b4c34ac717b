"""Which layers of a model attend within a sliding window, from its Hugging Face `config.json`
(docs/serving.md, "Sliding-window attention").

A serving step's annotation gives sums over its requests, never the model's window, so the
attention of gpt-oss, Gemma, Mistral or Qwen2 layers that see at most `sliding_window` keys would
be counted as full attention. The user gives the config (saved as `model_config.json` beside the
trace or above it, or named with `--model-config`); the layers it makes windowed follow the rule
vLLM's own FLOP estimator applies (vllm/v1/metrics/perf.py, `SlidingWindowAttentionParser`),
with the per-layer rules of the Hugging Face configs it reads:

- the text model's fields: `text_config` where the config has one (multimodal configs);
- `layer_types`: a layer is windowed when its type names `sliding` (`sliding_attention`);
- else `sliding_window_pattern` (Gemma 3: every pattern-th layer is full, the others windowed;
  `model_type` `gemma2` alternates, pattern 2);
- else `use_sliding_window` with `max_window_layers` (Qwen2: layers from index
  `max_window_layers` on are windowed);
- else every layer is windowed (Mistral, and vLLM's rule for a uniform window);
- no window at all when `sliding_window` is missing, null or not positive, or when
  `use_sliding_window` is false.
"""

from __future__ import annotations

import dataclasses
import os

from tb_roofline.devices.bounded_json import parse_json_file, read_small_text

FILE_NAME = "model_config.json"
MAX_FILE_BYTES = 4 << 20  # configs are kilobytes; a tokenizer or weights file is refused
MAX_LAYERS = 100_000
KNOWN_KEYS = frozenset(
    {
        "text_config",
        "num_hidden_layers",
        "sliding_window",
        "layer_types",
        "sliding_window_pattern",
        "use_sliding_window",
        "max_window_layers",
        "model_type",
    }
)


class ModelConfigError(ValueError):
    """A model config that cannot be used (the message names the file and the field)."""


@dataclasses.dataclass(frozen=True)
class AttentionWindows:
    """The window of a model's sliding-window layers: `window` keys per query (None: every
    layer attends in full), `windowed[i]` for layer i, `rule` the config field that decided,
    `source` the file's name."""

    source: str
    window: int | None
    windowed: tuple
    rule: str

    @property
    def layers(self) -> int:
        return len(self.windowed)

    def windowed_layers(self) -> list[int]:
        return [i for i, w in enumerate(self.windowed) if w]


def load(path: str) -> AttentionWindows:
    """The attention windows of the config file at `path` (bounded read, clear errors)."""
    name = os.path.basename(path)
    text = read_small_text(path, MAX_FILE_BYTES, ModelConfigError, "a model config")
    data = parse_json_file(text, name, ModelConfigError, KNOWN_KEYS)
    if not isinstance(data, dict):
        raise ModelConfigError(f"{name}: not a JSON object (a Hugging Face config.json is one)")
    return windows_of(data, name)


def _text_config(cfg: dict, name: str) -> dict:
    """The language model's part: `text_config` when the config has one."""
    text = cfg.get("text_config")
    if text is None:
        return cfg
    if not isinstance(text, dict):
        raise ModelConfigError(f"{name}: text_config is not an object")
    return {**{k: v for k, v in cfg.items() if k == "model_type"}, **text}


def _positive_int(cfg: dict, key: str, name: str, required: bool = False) -> int | None:
    value = cfg.get(key)
    if value is None and not required:
        return None
    if type(value) is not int or value <= 0:
        raise ModelConfigError(f"{name}: {key} must be a positive integer")
    return value


def windows_of(cfg: dict, name: str) -> AttentionWindows:
    """Windowed layers of a parsed config (the module's rule)."""
    text = _text_config(cfg, name)
    layers = _positive_int(text, "num_hidden_layers", name, required=True)
    assert layers is not None
    if layers > MAX_LAYERS:
        raise ModelConfigError(f"{name}: num_hidden_layers is over {MAX_LAYERS:,}")
    window = text.get("sliding_window")
    if window is not None and (type(window) is not int or window < 0):
        raise ModelConfigError(f"{name}: sliding_window must be an integer or null")
    if not window or text.get("use_sliding_window") is False:
        why = "use_sliding_window false" if window else "no sliding_window"
        return AttentionWindows(name, None, (False,) * layers, why)
    windowed, rule = _windowed(text, layers, name)
    return AttentionWindows(name, window, windowed, rule)


def _windowed(text: dict, layers: int, name: str) -> tuple[tuple, str]:
    """(windowed flag per layer, the field that decided)."""
    types = text.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ModelConfigError(f"{name}: layer_types is not a list of strings")
        if len(types) < layers:
            raise ModelConfigError(
                f"{name}: layer_types names {len(types)} layers, num_hidden_layers {layers}"
            )
        return tuple("sliding" in t.lower() for t in types[:layers]), "layer_types"
    pattern = text.get("sliding_window_pattern")
    if pattern is None and text.get("model_type") == "gemma2":
        pattern = 2
    if pattern is not None:
        pattern = _positive_int(text, "sliding_window_pattern", name) or pattern
        # (Gemma's rule: layer i is full where (i + 1) is a multiple of the pattern)
        return tuple((i + 1) % pattern != 0 for i in range(layers)), "sliding_window_pattern"
    if text.get("use_sliding_window") is True and text.get("max_window_layers") is not None:
        first = text.get("max_window_layers")
        if type(first) is not int or first < 0:
            raise ModelConfigError(f"{name}: max_window_layers must be a non-negative integer")
        return tuple(i >= first for i in range(layers)), "max_window_layers"
    return (True,) * layers, "sliding_window (every layer)"
