package org

# Undefined: no body holds.
nothing if { false }

# Null, which Warden reads as absent.
empty := null

level := 3
