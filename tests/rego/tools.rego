# Tool classification that reads the event: evaluated per decision.
package acme.tools

import rego.v1

high_risk := {"send_money", "delete_file", "execute_command"}

default classification := "low"

classification := "high" if input.payload.tool.name in high_risk

limits := {"send_email": 10, "send_money": 1}

limit := limits[input.payload.tool.name]

argument_names := sort([k | some k, _ in input.payload.arguments])

tainted_arguments := [k | some k, l in input.labels.arguments; "untrusted" in l]

deny contains msg if {
	input.payload.tool.name == "execute_command"
	contains(input.payload.arguments.cmd.value, "curl")
	msg := {"code": "acme.no_curl", "msg": "no network from the shell"}
}
