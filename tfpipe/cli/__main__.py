"""python -m tfpipe.cli: the `tfpipe` command."""

from tfpipe.cli import main

main()
