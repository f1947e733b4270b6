"""`python -m fabricsim` is the `fabricsim` command."""

from .cli import main

raise SystemExit(main())
