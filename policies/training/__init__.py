"""Training-side code of the router (stable-baselines3 PPO, Hydra, wandb)."""
