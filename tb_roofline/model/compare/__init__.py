"""Comparison: two runs, hosts or steps matched op by op, merged, and compared."""
