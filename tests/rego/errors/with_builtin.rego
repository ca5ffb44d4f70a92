# `with` replacing a function with a builtin: OPA does it, regorus cannot (it reads `lower` as
# an unsafe variable, and every rule of the package would fail at decision time). A function
# of the package that calls the builtin is fine.
package errors.with_builtin

import rego.v1

shout(s) := upper(s)

lower_case(s) := lower(s)

quiet := x if {
	x := shout(input.text) with upper as lower # missing: lower
}

fine := x if {
	x := shout(input.text) with upper as lower_case
}
