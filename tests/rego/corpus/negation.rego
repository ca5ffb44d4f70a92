# Conformance corpus: `not` over an expression with calls and references in it. OPA evaluates
# some of them before the negation (undefined there: the body fails); regorus alone would
# evaluate them inside (undefined there: `not` holds), so Warden moves them out first
# (docs/rego.md, "What Warden changes before regorus runs it").
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

# Counting under `not`: an absent list has no count, and OPA's body fails.
no_violations if not count(input.violations) > 0

# Arithmetic under `not`, in an `else` chain with bodies of one expression.
budget := "ok" if not input.spent + input.pending > 100
else := "over"

# `not` inside a comprehension and inside `every`.
unflagged := [k | some k in input.keys; not input.flags[lower(k)]]

all_unflagged if every k in input.keys {
	not input.flags[lower(k)]
}

# Several nested calls in one `not`, and a user function called at the top (not moved).
odd_pair if not sum([to_number(input.a), to_number(input.b)]) % 2 == 0

is_test(addr) if endswith(domain(addr), ".test")

not_test_user if not is_test(input.user)

# References as arguments under `not`: OPA evaluates them first (an absent field fails the
# body); as an operand of `==`, or alone, a reference stays inside the negation.
not_small if not input.n < 10

not_listed if not input.user in {"ann", "bob"}

not_ann if not input.user == "ann"

not_ann_list if not [input.user] == ["ann"]

no_user if not input.user

flag_unset if not input.flags[input.key]

# A `with` on the negated statement applies to what moves out of it.
not_test_as_input if not is_test(input.other) with input.other as input.user

# The variable the moved term reads is bound after the `not`: both reorder the body.
late_bound if {
	not is_test(u.addr)
	u = input.account
}

late_bound_in contains k if {
	not startswith(lower(v.name), "svc-")
	v = input.accounts[k]
}
