"""Test campaigns: firmware x fault scenarios x parameter spreads, each case an independent run,
judged against the same targets, collected in one results table (docs/campaigns.md)."""
