# Conformance corpus: `not` over an expression with a call nested in it. OPA evaluates the
# nested call before the negation (undefined there: the body fails); regorus evaluates it
# inside (undefined there: `not` holds). docs/rego.md, "Differences from OPA".
package corpus.negation

import rego.v1

domain(addr) := d if {
	parts := split(addr, "@")
	count(parts) == 2
	d := parts[1]
}

# The nested call inside `not`.
outside_nested contains r if {
	some r in input.to
	not endswith(domain(r), ".test")
}

# The same rule with the call bound first: one answer in OPA and regorus.
outside_bound contains r if {
	some r in input.to
	d := domain(r)
	not endswith(d, ".test")
}

# A builtin nested inside `not`, over an input field that may be absent.
not_admin_prefix if not startswith(lower(input.user), "admin")

not_admin_prefix_bound if {
	u := lower(input.user)
	not startswith(u, "admin")
}

# A call inside a reference's index under `not`.
flag_off if not input.flags[lower(input.key)]
