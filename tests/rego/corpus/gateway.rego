# Conformance corpus: a package that imports another one (through an alias and by full path)
# and `input` through an alias.
package corpus.gateway

import data.corpus.lib.names
import data.corpus.lib.names.reserved as blocked
import input.request as req
import rego.v1

user := lower(req.user)

reserved if user in blocked

display := names.pretty(user)

too_many_groups if count(req.groups) > names.max_groups

default allow := false

allow if {
	not reserved
	not too_many_groups
	count(req.groups) > 0
}

reason := "reserved user" if reserved
else := "too many groups" if too_many_groups
else := "no groups" if count(req.groups) == 0

greeting := sprintf("hello, %s", [display])
