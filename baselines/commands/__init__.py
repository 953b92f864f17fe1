"""The search package's ``connectx`` subcommands (see :data:`connectx_gym.cli.COMMANDS`)."""
