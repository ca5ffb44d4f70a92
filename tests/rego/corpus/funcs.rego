# Conformance corpus: functions — several definitions, boolean functions, undefined results,
# conflicting outputs, errors raised by builtins.
package corpus.funcs

import rego.v1

clamp(x, lo, _) := lo if x < lo

clamp(x, _, hi) := hi if x > hi

clamp(x, lo, hi) := x if {
	x >= lo
	x <= hi
}

fmt_user(u) := sprintf("%s <%s>", [u.name, u.email])

is_admin(u) if "admin" in u.roles

# Overlapping definitions: for x > 5 both give a value, an error.
grade(x) := 1 if x > 0

grade(x) := 2 if x > 5

sum_sq(xs) := sum([y | some x in xs; y := x * x])

pick(obj, keys) := {k: obj[k] | some k in keys; obj[k]}

admins := [u.name | some u in input.users; is_admin(u)]

ratio := input.a / input.b

# Functions over the input.
per_user := {u.name: fmt_user(u) | some u in input.users}

safe_ratio := r if {
	input.b != 0
	r := input.a / input.b
}

numeric := to_number(input.text)
