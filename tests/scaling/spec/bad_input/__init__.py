"""Tests of the spec's refusals: every bad study fails at load with one line naming the field."""
