"""The emulated link: capability probe, netem argv builder, linkem driver, model bounds."""
