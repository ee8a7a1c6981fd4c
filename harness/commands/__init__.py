"""Each module here registers one `python -m harness` subcommand with `harness.cli.command`."""
