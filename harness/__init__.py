"""xfrbench: a benchmarking harness for DNS zone transfers.

The map of this package (its pipeline, packages, import layers and result files) is
docs/architecture.md at the top of the repository.
"""

__version__ = "0.1.0"
