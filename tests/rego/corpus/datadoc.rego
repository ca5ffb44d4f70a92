# Conformance corpus: a package that reads a data document (`data/config.json`).
package corpus.datadoc

import data.config
import rego.v1

tool := config.tools[input.tool]

risk := tool.risk

limit := object.get(tool, "limit", 0)

over_limit if input.amount > tool.limit

owners := {o | some o in tool.owners}

blocked_recipient if {
	some r in input.to
	some d in config.blocked_domains
	endswith(r, concat("", ["@", d]))
}

high_risk_tools contains name if {
	some name, t in config.tools
	t.risk == "high"
}
