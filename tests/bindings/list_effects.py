"""A read-only listing command: the effects a test service keeps in a state directory
(one JSON file each), printed as one JSON array. ``python list_effects.py STATE_DIR``."""

import json
import os
import sys

state = sys.argv[1]
effects = []
for name in sorted(os.listdir(state)):
    if name.endswith(".json"):
        with open(os.path.join(state, name), encoding="utf-8") as handle:
            effects.append(json.load(handle))
json.dump(effects, sys.stdout)
