"""Serving: phases of serving steps (prefill, decode) and the decode roofline."""
