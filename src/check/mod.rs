//! The checker: name resolution across modules, typing against the ACS schemas, history
//! analysis, and the warnings a policy author wants to see.
