# A call to a function defined nowhere (a typo of `allowed`), below an import that comes
# after a rule: the line reported is still this file's line.
package errors.typo

allowed(x) if startswith(x, "ok-")

import rego.v1

deny contains msg if {
	some a in input.payload.arguments
	not alowed(a.value) # missing: alowed
	msg := "not allowed"
}

also := [x | some x in ["a"]; crypto.sha256(x) != ""] # missing: crypto.sha256
