"""The error of an invalid config value, shared by every layer that reads the config."""

from __future__ import annotations


class ConfigError(ValueError):
    """The config is invalid; the message names the field and the bad value."""
