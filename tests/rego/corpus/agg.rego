# Conformance corpus: sets and arrays, aggregates, ordering of mixed values, arithmetic.
package corpus.agg

import rego.v1

xs := input.xs

as_set := {x | some x in xs}

total := sum(xs)

biggest := max(xs)

smallest := min(xs)

ordered := sort(xs)

prod := product(xs)

common := as_set & {1, 2, 3, "a"}

either := as_set | {"z"}

only_mine := as_set - {1, 2}

halves := [y | some x in xs; y := x / 2]

remainders := [y | some x in xs; y := x % 3]

rounded := [round(x) | some x in xs]

first_three := array.slice(xs, 0, 3)

with_tail := array.concat(xs, ["tail"])

backwards := array.reverse(xs)

distinct := count(as_set)

low_bits := [bits.and(x, 6) | some x in xs]

ranged := numbers.range(1, count(xs))

grouped := {t: n | some x in xs; t := type_name(x); n := count([y | some y in xs; type_name(y) == t])}
