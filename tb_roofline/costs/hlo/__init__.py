"""HLO modules from profiles and their cost model (FLOPs, transcendentals, bytes, precision).

- `HloIndex.from_space(space)`: every `Hlo Proto` of `/host:metadata`, by program id.
- `module_costs(module)`: per-instruction `Cost`s of one program, cached per program.

The names below load their modules when first used, so importing a light submodule
(`tb_roofline.costs.hlo.fingerprint`, which the service needs for every answer) does not
load the cost model.
"""

import importlib

_WHERE = {
    "Cost": "cost_model",
    "CostModel": "cost_model",
    "ModuleCosts": "cost_model",
    "module_costs": "cost_model",
    "HloIndex": "module",
    "HloModule": "module",
    "Instruction": "module",
    "parse_module": "module",
}

__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
