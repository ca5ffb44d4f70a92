# benches/policies/twenty_rules.ward in Rego, given the summary a host would maintain
# (see benches/peers/src/lib.rs, `Summary`): turns since each label, per-turn counters by
# tool, the Intent, and for each argument its lineage's origins and depth.
package bench

import rego.v1

consequential := {"send_email", "send_money", "update_password", "post_webpage"}

admin_tools := {"update_password", "grant_access", "delete_account"}

banned_tools := {"format_disk", "drop_database"}

untrusted_origins := {"tool_output", "retrieved", "a2a_inbound", "external"}

tool := input.event.tool

args := input.event.args

s := input.summary

calls(name) := object.get(s.calls_this_turn_by_tool, name, 0)

untrusted_arg(a) if {
	some o in a.origins
	o in untrusted_origins
}

deny contains "taint.window" if {
	tool in consequential
	s.turns_since_untrusted <= 3
}

deny contains "taint.shell" if {
	tool == "execute_command"
	s.turns_since_untrusted <= 10
}

deny contains "taint.delete" if {
	tool == "delete_file"
	s.turns_since_untrusted <= 5
}

deny contains "taint.publish" if {
	tool == "post_webpage"
	s.turns_since_web <= 1
}

deny contains "taint.money" if {
	tool == "send_money"
	s.turns_since_untrusted <= 10
}

deny contains "taint.password" if {
	tool == "update_password"
	s.turns_since_web <= 20
}

deny contains "provenance.recipient" if {
	tool == "send_money"
	"tool_output" in args.recipient.origins
}

deny contains "provenance.email_to" if {
	tool == "send_email"
	untrusted_arg(args.to)
}

deny contains "provenance.argument" if {
	tool in consequential
	some a in args
	untrusted_arg(a)
}

deny contains "provenance.password" if {
	tool == "update_password"
	"retrieved" in args.new_password.origins
}

deny contains "provenance.lineage" if {
	tool in consequential
	some a in args
	a.depth > 5
}

deny contains "rate.calls" if s.calls_this_turn >= 25

deny contains "rate.email" if {
	tool == "send_email"
	calls("send_email") >= 3
}

deny contains "rate.money" if {
	tool == "send_money"
	calls("send_money") >= 1
}

deny contains "rate.search" if {
	tool == "search"
	calls("search") >= 10
}

deny contains "intent.mismatch" if {
	s.intent_declared
	not tool in s.intent_tools
}

deny contains "intent.admin" if {
	tool in admin_tools
	not s.intent_declared
}

deny contains "tool.banned" if tool in banned_tools

deny contains "sequence.email" if {
	tool == "send_email"
	calls("read_email") > 0
}

deny contains "sequence.publish" if {
	tool == "post_webpage"
	s.turns_since_read_file < 5
}

decision := "deny" if count(deny) > 0

else := "allow"
