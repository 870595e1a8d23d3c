"""`python -m harness`: the same as the `xfrbench` command."""

from harness.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
