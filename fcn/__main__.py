import sys

from fcn.cli import main

sys.exit(main())
