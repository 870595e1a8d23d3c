"""A run end to end: cases in the scenario's order, one visit of a group's testbed at a
time, records to the store.
"""
