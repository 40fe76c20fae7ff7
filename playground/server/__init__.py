"""What a public Space needs and a learner never reads: who is asking (tenancy.py), what each request may cost and
whether it may run now (admission.py), the training run's thread (jobs.py).

The core (run.py, checkpoints.py, the command lines) knows nothing of this package: the command line is the
operator's and meets only the size caps; the app's handlers come through here.
"""
