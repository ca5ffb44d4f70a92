# A tool-call policy written for another Guardian's input shape: an intervention point, a
# snapshot of what the agent is about to do, and annotations other components attached.
# Nothing here knows Warden; agt_mapping.ward builds this input from Warden's facts.
package agentgov.tools

import rego.v1

sensitive_tools := {"shell_exec", "write_file", "send_money"}

default allow := false

allow if {
	input.intervention_point == "tool_call"
	not blocked
}

# A sensitive tool whose arguments came from content nobody vouched for.
blocked if {
	input.snapshot.tool.name in sensitive_tools
	input.annotations.untrusted_arguments
}

# Too many calls in a short time.
blocked if input.annotations.recent_calls >= 5

# Large payments need a human.
needs_review if {
	input.snapshot.tool.name == "send_money"
	input.snapshot.tool.arguments.amount > 1000
}
