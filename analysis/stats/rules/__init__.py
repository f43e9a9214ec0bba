"""The verdict rules: error levels, the rule along N and D, the conditional verdict, side tables."""
