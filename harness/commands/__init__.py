"""Commands that inspect or tidy the host: `xfrbench doctor` and `xfrbench clean`."""
