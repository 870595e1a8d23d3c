"""Pure planning: a case becomes its plan; the order of cases and repeats; whether a
case fits the host.
"""
