"""What explains a model: the logit attribution, QK/OV circuits and knock-outs (circuits.py), on either family
through what family.py reads of it, why a head scored a key as it did (score_attribution.py), heads scored on
probes (head_scores.py), the Model tab's anatomy (anatomy/) and one head stepped through (walkthrough/).

Maths and lesson text only: no UI, no plots.
"""
