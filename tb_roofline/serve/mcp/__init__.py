"""`tb-roofline mcp`: the MCP server (`server.py`) over plain tool functions (`tools.py`) and
what every answer shares (`answers.py`).
"""
