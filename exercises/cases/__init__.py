"""One module per section of the exercise path, named like it: its exercises' cases (inputs from the
picked and the planted models), the lab's answers and the typical mistakes with their sentences. Each
exercise's check is one `CHECKS[name] = Check(...)` below the functions it uses: what changes when the
exercise changes sits in one place. `inputs` holds what the sections share. The engine that runs them is
exercises/engine.py."""
