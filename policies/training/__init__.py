"""Training-side code of the router (stable-baselines3 PPO, Hydra, wandb).

Nothing in here is needed to *use* an exported router; ``policies.router`` never imports it.
"""
