"""`python -m lbi_engine.cli` runs the `lbi` command."""

from lbi_engine.cli import main

raise SystemExit(main())
