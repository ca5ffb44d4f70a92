# benches/policies/taint_window.ward in Rego, given the summary a host would maintain:
# input.summary.turns_since_untrusted (absent if never).
package bench

import rego.v1

consequential := {"send_email", "send_money", "update_password", "post_webpage"}

deny contains "taint.window" if {
	input.event.tool in consequential
	input.summary.turns_since_untrusted <= 3
}

decision := "deny" if count(deny) > 0

else := "allow"
