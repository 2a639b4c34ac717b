// What the tab's terms mean, said on hover: rule ids of the Opportunities findings, MFU / HFU,
// megacore, ridge point (docs/guidance.md and docs/design.md say the same at length).
import {h} from './dom.js';

export const TERMS = {
  mfu: 'Model FLOPs utilisation: the model\'s FLOPs per step (from a workload file, not the ' +
    'profile) ÷ (step time × peak FLOP rate × devices). Rematerialised work does not count.',
  hfu: 'Hardware FLOPs utilisation: the FLOPs the profile counts per step (rematerialisation ' +
    'included) ÷ (step time × peak FLOP rate × devices).',
  megacore: 'Megacore: the chip\'s two TensorCores run one program as one device (TPU v4, ' +
    'v5p). The profile still times and rates each TensorCore, so every figure here is per ' +
    'TensorCore; the chip (what data sheets quote) has twice its peak FLOP rate and HBM ' +
    'bandwidth.',
  defaultPrecision: 'The profile states one peak FLOP rate for the device, not one per ' +
    'precision (TPU profiles: the matrix units\' bf16 rate); every op is judged under it.',
  ridge: 'Ridge point: the operational intensity (FLOP/byte) where a memory roof meets the ' +
    'compute roof, peak FLOP rate ÷ bandwidth. Ops left of it are bound by that memory, right ' +
    'of it by compute.',
};

/** What each finding rule of the Opportunities panel looks for (docs/guidance.md, Rules). */
export const RULES = {
  precision: 'A compute-bound f32 matmul or convolution on a device whose tf32 / bf16 roof is ' +
    'at least 4× higher: the time saved at the lower precision.',
  fusion: 'Two memory-bound elementwise ops that run back to back and share a tensor: fused, ' +
    'the intermediate is written and read once less.',
  repeated_copy: 'Copies or transposes of one shape repeated within a step: keeping one saves ' +
    'the others.',
  tiling: 'A compute-bound matmul or convolution under half its roof with shapes that do not ' +
    'tile the matrix units (multiples of 16 bytes on GPUs, (8, 128) tiles on TPUs).',
  tiny_ops: 'An op called at least 20 times per step for under 5 µs per call: launch and ' +
    'dispatch overhead rather than work.',
  far_below_roof: 'An op under half its roof (roofline efficiency < 50%) with a large share ' +
    'of the time that no other rule named: the gap to its roof.',
  idle: 'Time no op ran on a core while its next work was not launched yet (host-bound: ' +
    'input, synchronisations), or idle time of a graph capture.',
  idle_wait: 'Idle time after the next work was launched, while its stream waited for an ' +
    'event, or the host for a sync or blocking copy: a dependency, not input loading.',
  launch_latency: 'Idle time from a launch call to its kernel\'s start (up to 50 µs, or the ' +
    'whole call when it lasts longer).',
  idle_undetermined: 'Idle time the trace cannot explain: work launched but not run with no ' +
    'recorded wait, or work without a launch in the trace.',
  exposed_communication: 'Collectives, transfers and waits that ran while no compute op did: ' +
    'time that overlap could hide.',
  straggler: 'One host\'s step takes at least 1.15× the median of the others: the others wait ' +
    'for it.',
};

/** A term with its explanation on hover (a dotted underline says there is one). */
export function explained(text, title) {
  return h('abbr', {class: 'explained', title, tabindex: '0'}, text);
}
