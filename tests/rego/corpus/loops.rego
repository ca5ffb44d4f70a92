# Conformance corpus: `every`, `some … in` over arrays and objects, comprehensions.
package corpus.loops

import rego.v1

all_small if every x in input.nums {
	x < 10
}

keys_lower if every k, v in input.obj {
	k == lower(k)
	v != null
}

some_big if {
	some x in input.nums
	x > 100
}

# A complete rule: two negative numbers give two values, an error in OPA.
first_negative_at := i if {
	some i, x in input.nums
	x < 0
}

even_at contains [i, x] if {
	some i, x in input.nums
	x % 2 == 0
}

negatives := count([x | some x in input.nums; x < 0])

tools_ok if every t in input.tools {
	every a in t.args {
		is_string(a)
	}
}

doubled := [y | some x in input.nums; y := x * 2]

key_of_max := k if {
	some k, v in input.obj
	every w in input.obj {
		v >= w
	}
}
