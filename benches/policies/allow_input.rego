# Reads input: called at decision time.
package bench.allow_input

import rego.v1

allowed := {"read_file", "search", "send_email", "list_files"}

allowed_tool if input.payload.tool.name in allowed
