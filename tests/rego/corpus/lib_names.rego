# Imported by gateway.rego (not a corpus file of its own: no gateway cases here).
package corpus.lib.names

import rego.v1

reserved := {"root", "admin", "system"}

# "ann" -> "Ann"
pretty(u) := concat("", [upper(substring(u, 0, 1)), substring(u, 1, -1)])

# A rule that is an error whenever it is evaluated: the gateway never needs it.
broken := to_number("not a number")

max_groups := 3
