# Reads one rule of another package through an import alias.
package acme.gate

import rego.v1

import data.acme.names as n

reserved_user if input.payload.arguments.user.value in n.reserved

reserved_count := count(n.reserved)
