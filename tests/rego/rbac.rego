# Role-based access for agent tools: data only, folded by Warden when the policy loads.
package acme.rbac

import rego.v1

admins := {"alice", "bob"}

role_tools := {
	"support": ["read_ticket", "reply_ticket"],
	"finance": ["read_invoice", "send_money"],
}

finance_tools := {t | some t in role_tools.finance}

max_transfer := 2500

default break_glass := false
