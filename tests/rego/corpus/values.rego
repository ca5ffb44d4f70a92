# Conformance corpus: undefined and how it propagates; values that are true in a rule body.
package corpus.values

import rego.v1

limits := {"send_money": 1000, "send_email": 10}

limit := limits[input.tool]

over if input.amount > limit

# Defined for some arguments only.
tier(n) := "small" if n < 100

tier(n) := "large" if n >= 10000

amount_tier := tier(input.amount)

# An array with an undefined element is undefined as a whole.
pair := [input.a, input.b]

tool_limit := object.get(limits, input.tool, 0)

summary := {"tool": input.tool, "limit": limit}

zero := 0

empty := ""

nothing := null
