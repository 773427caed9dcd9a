"""Evaluation: the last step of the flow, above ``envs/`` and ``policies/``.

Everything ``evaluate.py`` does beyond loading data: the cost-quality frontier of routers against
fixed-tier baselines (runner, systems, bootstrap, aggregate, oracle, tier search, report, plots),
answer-quality headroom, evidence-recall and data-description commands, the HTM-EAR memory benchmark
command and the ``datasets`` exports of results. Loaders, memory building and scoring stay in
``benchmarks/``; nothing below this package imports it.
"""
