import sys

from logbroker.pipeline.run import main

sys.exit(main())
