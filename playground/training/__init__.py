"""Training: the loop (loop.py: ``train(...)`` with ``on_step``/``should_stop``), a run around it (run.py: plan,
build, train, checkpoint), what a run leaves (record.py), attention probes, curves, presets, optimizers,
torchrun's process group and what a run costs before it starts (estimates.py).

Knows nothing about visitors or threads (server/ owns those) and nothing about the UI.
"""
