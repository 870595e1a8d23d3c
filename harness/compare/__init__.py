"""`xfrbench compare RUN_A RUN_B`: is run B worse than run A, case by case."""
