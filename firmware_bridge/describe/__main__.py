"""`python -m firmware_bridge.describe MAP [MAP ...]`: the bus map's tables (firmware_bridge.describe)."""
import sys

from firmware_bridge.describe import main

if __name__ == "__main__":
    sys.exit(main())
