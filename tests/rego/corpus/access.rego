# Conformance corpus: roles, defaults, else chains, `not`, `every`, partial sets.
package corpus.access

import rego.v1

roles := {"alice": ["admin"], "bob": ["viewer", "editor"]}

user_roles contains r if some r in roles[input.user]

default allow := false

allow if "admin" in user_roles

allow if {
	input.action == "read"
	"viewer" in user_roles
}

allow if {
	input.action == "write"
	"editor" in user_roles
	not input.resource.locked
}

level := "high" if {
	"admin" in user_roles
} else := "medium" if {
	count(user_roles) > 0
}

tags_ok if every t in input.tags {
	startswith(t, "team-")
}

denied_reasons contains "locked" if input.resource.locked

denied_reasons contains "unknown user" if not roles[input.user]
