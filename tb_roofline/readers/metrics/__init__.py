"""Metrics named by others: CUPTI's counter names (both readers' hardware counters) and the
serving engines' exported FLOPs and bytes per step (docs/serving.md)."""
