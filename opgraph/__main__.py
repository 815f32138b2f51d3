import sys

from opgraph.cli import main

sys.exit(main())
