"""HLO modules from profiles and their cost model (FLOPs, transcendentals, bytes, precision).

- `HloIndex.from_space(space)`: every `Hlo Proto` of `/host:metadata`, by program id.
- `module_costs(module)`: per-instruction `Cost`s of one program, cached per program.
"""
from tb_roofline.hlo.cost_model import Cost, CostModel, ModuleCosts, module_costs
from tb_roofline.hlo.module import HloIndex, HloModule, Instruction, parse_module

__all__ = ["Cost", "CostModel", "ModuleCosts", "module_costs", "HloIndex", "HloModule",
           "Instruction", "parse_module"]
