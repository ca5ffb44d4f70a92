# Conformance corpus: `with` replacing input, data rules and functions.
package corpus.withs

import rego.v1

default allow := false

allow if input.user == "alice"

allow if input.user in data.corpus.withs.extra_users

extra_users := {"carol"}

as_bob := x if {
	x := allow with input.user as "bob"
}

as_alice := x if {
	x := allow with input as {"user": "alice"}
}

with_extra := x if {
	x := allow with data.corpus.withs.extra_users as {input.user}
}

limits := {"send": 10, "read": 100}

limit := limits[input.tool]

limit_replaced := x if {
	x := limit with data.corpus.withs.limits as {"send": 1}
}

allowed_users := [u | some u in input.users; allow with input.user as u]
