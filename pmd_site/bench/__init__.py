"""Benchmarks behind `pmd bench` (quality, latency, vector scale, indexing) and the API/MCP load test."""
