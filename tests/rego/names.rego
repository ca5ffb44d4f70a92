# Reserved account names. `level` is broken on purpose: its two bodies both hold and give
# different values, so evaluating it is an error. A rule that does not read it must not fail.
package acme.names

import rego.v1

reserved := {"admin", "root", "operator"}

level := "high" if count(reserved) > 1

level := "low" if count(reserved) > 0
