"""The verdict rules: the rule along N and D, the conditional verdict, verdict.json's tables."""
