# Conformance corpus: `with` replacing a function or a builtin (mocking), which regorus does
# not do (docs/rego.md, "Differences from OPA").
package corpus.mocks

import rego.v1

shout(s) := upper(s)

lower_case(s) := lower(s)

whisper := x if {
	x := shout(input.text) with upper as lower_case
}

is_ok(x) if x > 0

ok_mocked if {
	is_ok(-1) with is_ok as true
}

always_yes(_) := true

ok_by_function if {
	is_ok(-1) with is_ok as always_yes
}
