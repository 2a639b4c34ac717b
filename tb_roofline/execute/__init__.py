"""Running conversion units: on all local cores (`pool.py`) or on a Dask cluster (`cluster.py`,
`cluster_connect.py`).
"""
