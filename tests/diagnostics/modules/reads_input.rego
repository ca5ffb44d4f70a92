package inp

tool_name := input.payload.tool.name
