"""Imported first by a fixture the tests start as ``python -S`` (``kit.STDLIB_PYTHON``)
that needs the kit's own modules: they are made ``retryproof.*`` from this source tree,
as reference_impl/launch.py makes them for the reference, without ``site``, whose
editable-install hook was a third of such a start's CPU (24 -> 17 ms importing the
protocol module, 2 CPUs)."""

import os
import sys

package = type(sys)("retryproof")
package.__path__ = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
sys.modules.setdefault("retryproof", package)
