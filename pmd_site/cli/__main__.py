import sys

from pmd_site.cli import main

sys.exit(main())
