"""`python -m syncledger [OPTIONS] SCRIPT [ARGS...]`: a script under the sync ledger."""

import sys

from syncledger.cli import main

sys.exit(main())
