# Conformance corpus: functions undefined for some arguments, `not` over them, comprehensions,
# string builtins, a regular expression.
package corpus.text

import rego.v1

# The domain of an address; undefined without exactly one "@".
domain(addr) := d if {
	parts := split(addr, "@")
	count(parts) == 2
	d := lower(parts[1])
}

external_recipients contains r if {
	some r in input.to
	not endswith(domain(r), "example.com")
}

recipient_count := count(input.to)

first_word := split(trim_space(input.subject), " ")[0]

shout := upper(input.subject) if contains(input.subject, "!")

by_domain := {d: n |
	some d in {domain(r) | some r in input.to}
	n := count([r | some r in input.to; domain(r) == d])
}

sorted_to := sort(input.to)

joined := concat(", ", sort(input.to))

has_digits if regex.match(`[0-9]`, input.subject)
