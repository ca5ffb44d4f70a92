# Rules for rego_values.ward. Each rule is defined only for some tools (a rule with no value
# is undefined in Rego). The package reads `input`, so nothing is folded: every rule runs at
# decision time.
package semantics.values

import rego.v1

tool := input.payload.tool.name

info := {"owner": "ops", "level": 2} if tool == "obj"

flag := false if tool == "f"

flag := true if tool == "t"

zero := 0 if tool == "zero"

nothing := null if tool in {"nul", "nulc"}

# Known names only.
level(name) := 3 if name == "admin"

size(xs) := count(xs)

echo(x) := x

# Rules written for another input shape, called with the input a Warden policy builds.
at_tool_call if input.intervention_point == "tool_call"

snapshot_tool := input.snapshot.tool.name

reviewed if "security" in input.annotations.reviewers

is_null(x) if x == null

null_reviewer if input.reviewer == null
