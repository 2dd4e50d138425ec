"""`python -m kskill`."""

from kskill.cli import main

main()
