"""Evaluation: the last step of the flow, above ``envs/`` and ``policies/``."""
