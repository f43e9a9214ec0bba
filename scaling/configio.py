"""Moved to `foundation.config`; this alias remains only until `analysis.cli` imports it there.

Nothing in scaling, jobs, data_prep or models imports this module.
"""

from foundation.config import ConfigError, dump_file, flatten, from_dict, load_file, to_dict

__all__ = ["ConfigError", "from_dict", "to_dict", "flatten", "load_file", "dump_file"]
