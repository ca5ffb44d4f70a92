# Conformance corpus: partial sets and objects, a multi-value rule, an object conflict.
package corpus.partial

import rego.v1

violations contains msg if {
	some name, c in input.containers
	c.privileged
	msg := sprintf("%s is privileged", [name])
}

violations contains msg if {
	some name, c in input.containers
	not c.image
	msg := sprintf("%s has no image", [name])
}

images[name] := c.image if {
	some name, c in input.containers
	c.image
}

registry[name] := reg if {
	some name, c in input.containers
	reg := split(c.image, "/")[0]
}

# Keyed by registry: each key holds a set of names.
by_registry[reg] contains name if {
	some name, c in input.containers
	reg := split(c.image, "/")[0]
}

# Two bodies can give one key two values: an error when they do.
exposure[name] := "public" if {
	some name, c in input.containers
	c.port < 1024
}

exposure[name] := "internal" if {
	some name, c in input.containers
	c.internal
}

privileged_count := count({n | some n, c in input.containers; c.privileged})

deny contains {"code": "no_image", "msg": n} if {
	some n, c in input.containers
	not c.image
}
