"""The CLI's subcommands, one module each (`mindspeed-prof COMMAND`), imported only when named."""
