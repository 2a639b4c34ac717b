"""`tb-roofline mcp`: the MCP server (`server.py`; each tool declared in
`tool_declarations.py` with the types of `tool_types.py`, run by `calls.py`) over plain tool
functions (`tools.py`, `op_tools.py`), what they share (`shaping.py`) and what every answer
shares (`envelope.py`).
"""
