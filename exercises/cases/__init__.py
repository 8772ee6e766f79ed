"""One module per section of the exercise path, named like it: its exercises' cases (inputs from the
picked and the planted models), the lab's answers and the typical mistakes with their sentences, in a
dict CHECKS at the end. `inputs` holds what the sections share. The engine that runs them is
exercises/engine.py."""
