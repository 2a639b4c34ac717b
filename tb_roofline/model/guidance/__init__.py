"""Guidance: the facts each rule reads, the rules (ops, memory, matmul, program, idle), their
advice text, and the ranked findings with the step-time split."""
