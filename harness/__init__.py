"""xfrbench: a benchmarking harness for DNS zone transfers."""

__version__ = "0.1.0"
