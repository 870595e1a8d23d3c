"""The words, units, errors and small utilities every stage shares."""
