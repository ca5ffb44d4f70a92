# Conformance corpus: `else` chains on rules and functions, defaults, `false` as a value.
package corpus.tiers

import rego.v1

risk := "critical" if input.score >= 90
else := "high" if input.score >= 70
else := "medium" if input.score >= 40
else := "low"

default decision := "deny"

decision := "allow" if {
	input.role == "admin"
} else := "review" if {
	input.role == "dev"
	input.env != "prod"
}

bucket(n) := "tiny" if n < 10
else := "mid" if n < 1000
else := "huge"

size_label := bucket(input.size)

ttl := input.ttl if {
	input.ttl > 0
} else := 3600

strict := true if input.mode == "strict" else := false

# An else chain under a default whose bodies are all undefined.
default tier := "none"

tier := "gold" if {
	input.spend > 1000
} else := "silver" if {
	input.spend > 100
}
