"""DNS server adapters (BIND 9, Knot DNS, NSD) and the static facts about each kind."""
