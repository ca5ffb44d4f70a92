# An import after the first rule: OPA accepts it, and so does Warden.
package acme.late

limits := {"send_money": 1000, "send_email": 1}

import rego.v1
import data.acme.rbac as rbac # the transfer ceiling

over_limit if input.payload.arguments.amount.value > rbac.max_transfer

tool_limit := limits[input.payload.tool.name]
